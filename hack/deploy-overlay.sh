#!/usr/bin/env bash
# Writes a kustomization in DIR that deploys config/default with every
# component's image set to REPO/<binary>:TAG (make deploy, make kind-up).
# Usage: hack/deploy-overlay.sh DIR REPO TAG
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=components.sh
source "${ROOT}/hack/components.sh"

[[ $# -eq 3 ]] || { echo "usage: $0 DIR REPO TAG" >&2; exit 2; }
dir="$1" repo="$2" tag="$3"
mkdir -p "${dir}"
dir="$(cd "${dir}" && pwd -P)"

# relpath TARGET FROM: TARGET relative to the directory FROM, both absolute
# (kustomize refuses an absolute resource path; no GNU realpath needed).
relpath() {
  local target="$1" from="$2" up=""
  until [[ "${from}" == / || "${target}" == "${from}"/* ]]; do
    from="$(dirname "${from}")" up="../${up}"
  done
  if [[ "${from}" == / ]]; then echo "${up}${target#/}"; else echo "${up}${target#"${from}"/}"; fi
}
base="$(relpath "$(cd "${ROOT}/config/default" && pwd -P)" "${dir}")"
{
  echo "# Written by hack/deploy-overlay.sh: config/default with the images of ${repo}, tag ${tag}."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- ${base}"
  echo "images:"
  for b in "${TERRACE_BINARIES[@]}"; do
    # The generated manifests name every image localhost/terrace/<binary>.
    echo "- name: localhost/terrace/${b}"
    echo "  newName: ${repo}/${b}"
    echo "  newTag: \"${tag}\""
  done
} >"${dir}/kustomization.yaml"
echo "${dir}/kustomization.yaml: images ${repo}/<binary>:${tag}"
