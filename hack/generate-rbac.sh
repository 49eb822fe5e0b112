#!/usr/bin/env bash
# Generates one ClusterRole per binary from the +kubebuilder:rbac markers beside
# its reconcilers, into <out>/<binary>/role.yaml (default out: config/rbac).
# make verify-generate runs it into a temporary directory and compares.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-${ROOT}/config/rbac}")"
: "${CONTROLLER_GEN:?set CONTROLLER_GEN to the pinned controller-gen (make generate does)}"

# shellcheck source=components.sh
source "${ROOT}/hack/components.sh"

for c in "${TERRACE_COMPONENTS[@]}"; do
  read -r binary module pkgs <<<"${c}"
  paths=()
  IFS=';' read -ra pkglist <<<"${pkgs}"
  for p in "${pkglist[@]}"; do
    # Skip package patterns that do not exist (yet) in the module.
    dir="${ROOT}/${module}/${p%/...}"
    [[ -d "${dir}" ]] && paths+=("paths=${p}")
  done
  mkdir -p "${out}/${binary}"
  rm -f "${out}/${binary}/role.yaml"
  (cd "${ROOT}/${module}" && "${CONTROLLER_GEN}" rbac:roleName="terrace-${binary}" "${paths[@]}" \
    output:rbac:artifacts:config="${out}/${binary}")
  # A binary with no markers yet still gets a (rule-less) role file, so the
  # set of files never depends on which components have reconcilers.
  [[ -f "${out}/${binary}/role.yaml" ]] || printf 'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: terrace-%s\nrules: []\n' "${binary}" >"${out}/${binary}/role.yaml"
done
