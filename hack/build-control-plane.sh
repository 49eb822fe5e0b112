#!/usr/bin/env bash
# Builds the control-plane binaries envtest and the local environment run
# (etcd, kube-apiserver, kube-controller-manager) from the Go module proxy into
# bin/k8s/. Prebuilt binaries cannot be downloaded on the machines Terrace is
# developed on, so the project builds its own from pinned module versions
# (hack/tools/kube/go.mod, hack/tools/etcd/go.mod). A stamp file records the
# pinned versions; the build is skipped when the stamp matches. The OCI
# registry the local environment runs beside the control plane is built first
# (hack/build-registry.sh, into bin/registry), so every target that starts a
# local environment (up, e2e, bench) has it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/k8s"
KUBE_MOD="${ROOT}/hack/tools/kube"
ETCD_MOD="${ROOT}/hack/tools/etcd"

"${ROOT}/hack/build-registry.sh"

stamp() {
  # The stamp hashes both modules' go.mod and go.sum and this script: bumping a
  # pin or changing how we build rebuilds.
  cat "${KUBE_MOD}/go.mod" "${KUBE_MOD}/go.sum" "${ETCD_MOD}/go.mod" "${ETCD_MOD}/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1
}

want="$(stamp)"
if [[ -x "${OUT}/kube-apiserver" && -x "${OUT}/etcd" && -x "${OUT}/kube-controller-manager" && -f "${OUT}/.stamp" && "$(cat "${OUT}/.stamp")" == "${want}" ]]; then
  echo "control plane up to date in ${OUT}"
  exit 0
fi

mkdir -p "${OUT}"
export GOWORK=off CGO_ENABLED=0
# Stamp the Kubernetes version into the binaries (a module build carries no git
# metadata), so `kubectl version` and discovery report the real server version.
kube_version="$(awk '{ for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes") { print $(i + 1); exit } }' "${KUBE_MOD}/go.mod")"
[[ "${kube_version}" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "cannot read the k8s.io/kubernetes version from ${KUBE_MOD}/go.mod" >&2; exit 1; }
kube_minor="$(echo "${kube_version}" | cut -d. -f2)"
ver_pkg="k8s.io/component-base/version"
ldflags="-s -w"
kube_ldflags="${ldflags} -X ${ver_pkg}.gitVersion=${kube_version} -X ${ver_pkg}.gitMajor=1 -X ${ver_pkg}.gitMinor=${kube_minor} -X ${ver_pkg}.gitTreeState=clean"

echo "building etcd into ${OUT} (about 30s cold)"
(cd "${ETCD_MOD}" && go build -trimpath -ldflags "${ldflags}" -o "${OUT}/etcd" go.etcd.io/etcd/server/v3)

echo "building kube-apiserver and kube-controller-manager into ${OUT} (about 4-6 min cold on 2 cores)"
(cd "${KUBE_MOD}" && go build -trimpath -ldflags "${kube_ldflags}" -o "${OUT}/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)

echo "${want}" > "${OUT}/.stamp"
"${OUT}/kube-apiserver" --version
# awk reads all of etcd's output: `head -1` would close the pipe early, and under
# pipefail etcd's SIGPIPE would fail a build that succeeded.
"${OUT}/etcd" --version | awk 'NR == 1'

