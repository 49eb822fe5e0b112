#!/usr/bin/env bash
# Builds everything the local node (make up NODE=1) runs, from the Go module
# proxy, into bin/node/, like hack/build-control-plane.sh builds the control
# plane:
#   kubelet, kube-proxy, kube-scheduler  hack/tools/node (k8s.io/kubernetes at
#                                        the control plane's version)
#   containerd, containerd-shim-runc-v2, ctr   hack/tools/containerd
#   cni/{bridge,host-local,loopback,portmap}   hack/tools/cni
#   coredns                              hack/tools/coredns
#   images/{build-images,pause,webserver,relay} hack/tools/images
# runc comes from the distribution (hack/node-env.sh installs it). A stamp
# file records the pins; the build is skipped when the stamp matches.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/node"
TOOLS="${ROOT}/hack/tools"
MODULES=(node containerd cni coredns images)

stamp() {
  local m
  {
    for m in "${MODULES[@]}"; do cat "${TOOLS}/${m}/go.mod" "${TOOLS}/${m}/go.sum"; done
    find "${TOOLS}/images" "${TOOLS}/coredns" -name '*.go' | sort | xargs cat
    cat "${BASH_SOURCE[0]}"
  } | sha256sum | cut -d' ' -f1
}

want="$(stamp)"
if [[ -f "${OUT}/.stamp" && "$(cat "${OUT}/.stamp")" == "${want}" ]]; then
  echo "node binaries up to date in ${OUT}"
  exit 0
fi

# The control plane and the node must run the same Kubernetes version.
kube_version() { awk '{ for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes") { print $(i + 1); exit } }' "$1/go.mod"; }
version="$(kube_version "${TOOLS}/node")"
[[ "${version}" == "$(kube_version "${TOOLS}/kube")" ]] ||
  { echo "hack/tools/node pins k8s.io/kubernetes ${version}, hack/tools/kube $(kube_version "${TOOLS}/kube"): pin both to one version" >&2; exit 1; }
[[ "${version}" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "cannot read the k8s.io/kubernetes version from ${TOOLS}/node/go.mod" >&2; exit 1; }
minor="${BASH_REMATCH[1]}"

mkdir -p "${OUT}/cni" "${OUT}/images"
rm -f "${OUT}/.stamp"
export GOWORK=off CGO_ENABLED=0
ldflags="-s -w"
ver_pkg="k8s.io/component-base/version"
kube_ldflags="${ldflags} -X ${ver_pkg}.gitVersion=${version} -X ${ver_pkg}.gitMajor=1 -X ${ver_pkg}.gitMinor=${minor} -X ${ver_pkg}.gitTreeState=clean"

echo "building kubelet, kube-proxy and kube-scheduler ${version} into ${OUT} (about 5 min cold on 2 cores)"
(cd "${TOOLS}/node" && go build -trimpath -ldflags "${kube_ldflags}" -o "${OUT}/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler)

ctd="github.com/containerd/containerd/v2"
ctd_version="$(awk -v p="${ctd}" '$1 == p || $2 == p { print ($1 == p ? $2 : $3); exit }' "${TOOLS}/containerd/go.mod")"
echo "building containerd ${ctd_version} and its runc shim into ${OUT} (about 3 min cold)"
# Without cgo: the snapshotters that need it (btrfs, devmapper, zfs) are left
# out; the node uses overlayfs.
(cd "${TOOLS}/containerd" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
  -ldflags "${ldflags} -X ${ctd}/version.Version=${ctd_version}" -o "${OUT}/" \
  "${ctd}/cmd/containerd" "${ctd}/cmd/containerd-shim-runc-v2" "${ctd}/cmd/ctr")

echo "building the CNI plugins into ${OUT}/cni"
cni="github.com/containernetworking/plugins/plugins"
(cd "${TOOLS}/cni" && go build -trimpath -ldflags "${ldflags}" -o "${OUT}/cni/" \
  "${cni}/main/bridge" "${cni}/ipam/host-local" "${cni}/main/loopback" "${cni}/meta/portmap")

echo "building CoreDNS into ${OUT}"
(cd "${TOOLS}/coredns" && go build -trimpath -ldflags "${ldflags}" -o "${OUT}/coredns" .)

echo "building the image builder and the programs of the node's images into ${OUT}/images"
(cd "${TOOLS}/images" && go build -trimpath -ldflags "${ldflags}" -o "${OUT}/images/" ./build-images ./pause ./webserver ./relay)

echo "${want}" >"${OUT}/.stamp"
"${OUT}/kubelet" --version
"${OUT}/containerd" --version
