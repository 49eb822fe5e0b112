# shellcheck shell=bash
# Terrace on its own node, sourced by hack/local-env.sh:
#   images        builds one image per binary (static, on the project's base
#                 image, no Docker) and pushes it to the local registry as
#                 terrace/<binary>:TERRACE_IMAGE_TAG (default dev);
#                 TERRACE_IMAGES="a b" builds only those binaries.
#                 .local/images lists each image as last pushed, by digest.
#   deploy-local  deploys every component from those images into
#                 terrace-system on the local node (make up NODE=1), with the
#                 kustomize manifests of make deploy and an overlay
#                 (.local/deploy-local/), in place of the controller
#                 processes; run again after make images, it rolls exactly the
#                 components whose image changed.
#   undeploy-local removes the Deployments and starts the processes again.
#
# The local environment's services listen on loopback. In each pod a relay
# (a native sidecar) opens kube-apiserver's and the registry's loopback ports
# inside the pod and relays them to the node's IP, where relay hands
# them on: a controller in a pod reaches them at the same addresses as a
# controller process (the Targets and registry references users write for the
# local environment name 127.0.0.1).

IMAGES_BIN="${BIN}/images"
IMAGE_TAG="${TERRACE_IMAGE_TAG:-dev}"
IMAGES_FILE="${LOCAL}/images"
DEPLOY_LOCAL_DIR="${LOCAL}/deploy-local"

# deployed_locally: make deploy-local ran and make undeploy-local did not.
deployed_locally() { [[ -f "${DEPLOY_LOCAL_DIR}/deployed" ]]; }

# binary_package BINARY: the main package of BINARY (hack/components.sh names
# its module; deployers keep theirs under cmd/).
binary_package() {
  local c b module
  for c in "${TERRACE_COMPONENTS[@]}"; do
    read -r b module _ <<<"${c}"
    [[ "${b}" == "$1" ]] || continue
    if [[ -d "${ROOT}/${module}/cmd/${b}" ]]; then echo "./${module}/cmd/${b}"; else echo "./${module}"; fi
    return 0
  done
  die "no binary $1; the binaries are: ${TERRACE_BINARIES[*]}"
}

# image_of NAME: the reference by digest of terrace/NAME as last pushed.
image_of() { awk -v n="$1" '$1 == n { print $2 }' "${IMAGES_FILE}" 2>/dev/null; }

images() {
  running registry || die "the local registry is not running: run make up first"
  local want b pkgs=() args=()
  read -r -a want <<<"${TERRACE_IMAGES:-${TERRACE_BINARIES[*]}}"
  for b in "${want[@]}"; do
    pkgs+=("$(binary_package "${b}")")
    args+=(--image "${b}=${IMAGES_BIN}/${b}")
  done
  mkdir -p "${IMAGES_BIN}" "${LOCAL}"
  log "building ${want[*]} (static) into ${IMAGES_BIN}"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${IMAGE_TAG}" -o "${IMAGES_BIN}/" "${pkgs[@]}") ||
    die "building the binaries failed"
  (cd "${ROOT}/hack/tools/images" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "${IMAGES_BIN}/" ./build-images) ||
    die "building the image builder failed"
  log "pushing terrace/<binary>:${IMAGE_TAG} to $(cat "${REGISTRY_DIR}/address")"
  local pushed
  pushed="$("${IMAGES_BIN}/build-images" --registry "$(cat "${REGISTRY_DIR}/address")" --repository terrace \
    --tag "${IMAGE_TAG}" --label "org.opencontainers.image.version=${IMAGE_TAG}" "${args[@]}" 2>"${LOGS}/images.log")" ||
    die "building or pushing the images failed; see ${LOGS}/images.log"
  # The images pushed now replace their lines; the others keep theirs.
  {
    [[ -f "${IMAGES_FILE}" ]] && awk 'NR == FNR { fresh[$1] = 1; next } !($1 in fresh)' <(echo "${pushed}") "${IMAGES_FILE}"
    echo "${pushed}"
  } | sort >"${IMAGES_FILE}.new"
  mv "${IMAGES_FILE}.new" "${IMAGES_FILE}"
  echo "${pushed}" | grep -v '^base '
}

# deploy_local_overlay writes .local/deploy-local/kustomization.yaml:
# config/default with the images of .local/images by digest, the relay
# sidecar in every pod, and the flags the processes get here too.
deploy_local_overlay() {
  local relay b
  relay="$(node_image relay)"
  [[ -n "${relay}" ]] || die "the node has no relay image: run make up NODE=1 again"
  mkdir -p "${DEPLOY_LOCAL_DIR}"
  {
    echo "# Written by make deploy-local: config/default with the images of .local/images."
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "resources:"
    echo "- $(realpath --relative-to "${DEPLOY_LOCAL_DIR}" "${ROOT}/config/default")"
    echo "images:"
    for b in "${TERRACE_BINARIES[@]}"; do
      local ref
      ref="$(image_of "${b}")"
      [[ -n "${ref}" ]] || die "no image of ${b} in ${IMAGES_FILE}: run make images"
      echo "- name: localhost/terrace/${b}"
      echo "  newName: ${ref%@*}"
      echo "  digest: ${ref#*@}"
    done
    echo "patches:"
    echo "- target: {kind: Deployment, labelSelector: app.kubernetes.io/part-of=terrace}"
    echo "  patch: |-"
    echo "    - op: add"
    echo "      path: /spec/template/spec/initContainers"
    echo "      value:"
    echo "      - name: loopback-relay"
    echo "        image: ${relay}"
    echo "        restartPolicy: Always"
    echo "        args: [-forward, '127.0.0.1:${APISERVER_PORT}=${NODE_IP}:${APISERVER_PORT}', -forward, '127.0.0.1:${REGISTRY_PORT}=${NODE_IP}:${REGISTRY_PORT}', -health-address, ':8099']"
    echo "        startupProbe: {httpGet: {path: /healthz, port: 8099}, periodSeconds: 1, failureThreshold: 30}"
    echo "        resources: {requests: {cpu: 5m, memory: 8Mi}, limits: {memory: 32Mi}}"
    echo "        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}"
    for b in "${TERRACE_BINARIES[@]}"; do
      local flags=()
      mapfile -t flags < <(loopback_flags "${b}")
      ((${#flags[@]} > 0)) || continue
      echo "- target: {kind: Deployment, name: ${b}}"
      echo "  patch: |-"
      local f
      for f in "${flags[@]}"; do
        echo "    - {op: add, path: /spec/template/spec/containers/0/args/-, value: ${f}}"
      done
    done
  } >"${DEPLOY_LOCAL_DIR}/kustomization.yaml"
}

deploy_local() {
  if ! node_started || ! running kubelet; then
    die "make deploy-local runs Terrace on the local node: start it with make up NODE=1 (as root)"
  fi
  deploy_local_overlay
  kubectl_admin kustomize "${DEPLOY_LOCAL_DIR}" >"${DEPLOY_LOCAL_DIR}/manifests.yaml" ||
    die "kustomize refused ${DEPLOY_LOCAL_DIR}/kustomization.yaml"
  # The processes stop first: two leaders of one controller, a process and a
  # pod, would share its Leases but not its view of the local files.
  touch "${DEPLOY_LOCAL_DIR}/deployed"
  local c
  for c in "${CONTROLLERS[@]}"; do stop "${c}"; done
  log "deploying Terrace from .local/images into ${NAMESPACE} on ${NODE_NAME}"
  kubectl_admin apply --server-side --force-conflicts -f "${DEPLOY_LOCAL_DIR}/manifests.yaml" >/dev/null ||
    die "applying ${DEPLOY_LOCAL_DIR}/manifests.yaml failed"
  for c in "${CONTROLLERS[@]}"; do
    kubectl_admin -n "${NAMESPACE}" rollout status "deployment/${c}" --timeout 180s >/dev/null ||
      die "deployment/${c} did not roll out; kubectl -n ${NAMESPACE} describe deployment/${c} and kubectl -n ${NAMESPACE} logs deployment/${c} tell why"
  done
  deployed_status
}

undeploy_local() {
  if running kube-apiserver; then
    kubectl_admin -n "${NAMESPACE}" delete deployments -l app.kubernetes.io/part-of=terrace --wait --timeout 120s >/dev/null
  fi
  rm -f "${DEPLOY_LOCAL_DIR}/deployed"
  running kube-apiserver && start_controllers
  log "Terrace runs as processes again"
}

# deployed_status prints each component's Deployment: ready replicas and image.
deployed_status() {
  kubectl_admin -n "${NAMESPACE}" get deployments -l app.kubernetes.io/part-of=terrace \
    -o custom-columns='COMPONENT:.metadata.name,READY:.status.readyReplicas,WANTED:.spec.replicas,IMAGE:.spec.template.spec.containers[0].image'
}
