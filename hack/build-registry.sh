#!/usr/bin/env bash
# Builds the OCI distribution registry the local environment runs (bin/registry)
# from the Go module proxy, at the version pinned in hack/tools/registry/go.mod,
# like hack/build-control-plane.sh builds the control plane. A stamp file
# records the pin; the build is skipped when the stamp matches.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/registry"
MOD="${ROOT}/hack/tools/registry"
STAMP="${ROOT}/bin/.registry.stamp"

# The stamp hashes the module's go.mod and go.sum and this script: bumping the
# pin or changing how we build rebuilds.
want="$(cat "${MOD}/go.mod" "${MOD}/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -x "${OUT}" && -f "${STAMP}" && "$(cat "${STAMP}")" == "${want}" ]]; then
  echo "registry up to date in ${OUT}"
  exit 0
fi

mkdir -p "${ROOT}/bin"
export GOWORK=off CGO_ENABLED=0
pkg="github.com/distribution/distribution/v3"
version="$(awk -v pkg="${pkg}" '{ for (i = 1; i < NF; i++) if ($i == pkg) { print $(i + 1); exit } }' "${MOD}/go.mod")"
[[ "${version}" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { echo "cannot read the ${pkg} version from ${MOD}/go.mod" >&2; exit 1; }

echo "building the OCI registry ${version} into ${OUT} (a few minutes cold)"
# Stamp the version: a module build carries no git metadata.
(cd "${MOD}" && go build -trimpath -ldflags "-s -w -X ${pkg}/version.version=${version}" -o "${OUT}" "${pkg}/cmd/registry")
echo "${want}" >"${STAMP}"
"${OUT}" --version
