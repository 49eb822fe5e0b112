#!/usr/bin/env bash
# Checks that the Dockerfile's dependency stage works for every binary: it
# copies only the go.mod/go.sum files its COPY lines name (MODULE filled in)
# into an empty directory and runs the stage's `GOWORK=off go mod download`
# there. A module whose go.mod replaces a sibling the Dockerfile does not copy
# fails here, as its image build would (no Docker needed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=components.sh
source "${ROOT}/hack/components.sh"

# The module files the dependency stage copies: "COPY <dir>/go.mod <dir>/go.sum <dir>/".
mapfile -t copied < <(sed -n 's|^COPY \([^ ]*\)/go\.mod [^ ]*/go\.sum [^ ]*/$|\1|p' "${ROOT}/Dockerfile")
[[ ${#copied[@]} -gt 0 ]] || { echo "verify-dockerfile: no module COPY lines found in Dockerfile" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
declare -A seen=()
for component in "${TERRACE_COMPONENTS[@]}"; do
  read -r binary module _ <<<"${component}"
  [[ -n "${seen[${module}]:-}" ]] && continue
  seen[${module}]=1
  ctx="${tmp}/${module}"
  for dir in "${copied[@]}"; do
    dir="${dir//\$\{MODULE\}/${module}}"
    mkdir -p "${ctx}/${dir}"
    cp "${ROOT}/${dir}/go.mod" "${ROOT}/${dir}/go.sum" "${ctx}/${dir}/"
  done
  echo "Dockerfile dependency stage: ${module} (${binary})"
  if ! (cd "${ctx}/${module}" && GOWORK=off GOFLAGS=-mod=mod go mod download >/dev/null 2>"${tmp}/err"); then
    echo "verify-dockerfile: the image of ${binary} would not build: the Dockerfile copies the go.mod of ${copied[*]} only:" >&2
    cat "${tmp}/err" >&2
    exit 1
  fi
done
