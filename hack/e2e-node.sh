#!/usr/bin/env bash
# make e2e-node: the e2e suite against Terrace running as pods on a real node.
# It starts a local environment of its own (.local/e2e-node, its own ports)
# with the node (make up NODE=1), builds and pushes every image (make images),
# deploys them (make deploy-local), pushes a second image of the execution
# controller for the rolling-upgrade spec, and runs e2e/suite against it as
# an existing cluster (with the node's webserver image for the workload spec). The environment is stopped at the end; its state and
# logs stay in .local/e2e-node until the next run. Needs root, like the node.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ "$(id -u)" == 0 ]] || { echo "error: make e2e-node runs a node: run it as root" >&2; exit 1; }

export TERRACE_LOCAL_DIR="${ROOT}/.local/e2e-node" TERRACE_NODE=1
# Beside a developer's make up (.local), the e2e suite's own environment and
# make bench's.
export TERRACE_ETCD_PORT=25379 TERRACE_ETCD_PEER_PORT=25380 TERRACE_APISERVER_PORT=29443 \
  TERRACE_KCM_PORT=20557 TERRACE_CONTROLLER_PORT_BASE=32080
local_env() { "${ROOT}/hack/local-env.sh" "$@"; }

local_env clean
trap 'local_env down' EXIT
local_env up
TERRACE_IMAGE_TAG=dev local_env images >/dev/null
local_env deploy-local
upgrade="$(TERRACE_IMAGES=execution-controller TERRACE_IMAGE_TAG=e2e-upgrade local_env images | awk '$1 == "execution-controller" { print $2 }')"
[[ -n "${upgrade}" ]] || { echo "error: no second image of execution-controller was pushed" >&2; exit 1; }

cd "${ROOT}/e2e"
# TEST_FLAGS holds several flags: split on purpose.
read -r -a test_flags <<<"${TEST_FLAGS:--count=1 -timeout=30m}"
E2E_KUBECONFIG="${TERRACE_LOCAL_DIR}/kubeconfig" \
  E2E_TARGET_SERVER="https://127.0.0.1:${TERRACE_APISERVER_PORT}" \
  E2E_REGISTRY="$(cat "${TERRACE_LOCAL_DIR}/registry/address")" \
  E2E_UPGRADE_IMAGE="execution-controller=${upgrade}" \
  E2E_WEBSERVER_IMAGE="$(awk '$1 == "webserver" { print $2 }' "${TERRACE_LOCAL_DIR}/node/images")" \
  go test "${test_flags[@]}" -v ./suite/ -ginkgo.v
