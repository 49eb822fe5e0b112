# shellcheck shell=bash
# The local node: with TERRACE_NODE=1 (make up NODE=1 sets it),
# hack/local-env.sh (which sources this file)
# adds a real single node, terrace-node, to the local control plane:
# kube-scheduler, containerd (with runc), kubelet, kube-proxy (iptables) and
# CoreDNS, all processes built by hack/build-node.sh into bin/node/. Pods get
# addresses on a bridge (terrace0) that stays inside the machine: no
# masquerade and no route off the host. Every image the node runs is built by
# the project (hack/tools/images) and pushed to the local registry.
#
# It needs root and a Linux kernel with overlayfs, bridges, veth pairs,
# br_netfilter and iptables (nf_tables or legacy); node_preflight names what
# is missing. One node per machine: the bridge, /run/terrace-node and the
# kubelet's ports are machine-wide.
#
# State: .local/node/ (containerd's images and snapshots, the kubelet's root,
# configuration, CNI configuration and IPAM), /run/terrace-node/ (containerd's
# runtime state, socket and the pods' network namespaces).

# Not NODE itself: make exports a NODE=1 given on its command line to every
# recipe, and the e2e suite's and make bench's environments must stay without a node.
NODE_WANTED="${TERRACE_NODE:-0}"
NODE_NAME="terrace-node"
NODE_DIR="${LOCAL}/node"
NODE_RUN="/run/terrace-node"
# Resolved: the shims are found by the path of their binary.
NODE_BIN="$(realpath -m "${BIN}/node")"
NODE_BRIDGE="terrace0"
# The pods' subnet (a /24); its first address is the bridge's, which is also
# the node's IP (the kubelet refuses a loopback one) and cluster DNS's.
POD_SUBNET="${TERRACE_POD_SUBNET:-10.244.0.0/24}"
NODE_IP="${POD_SUBNET%.*}.1"
SERVICE_SUBNET="10.0.0.0/24"
CONTAINERD_SOCK="${NODE_RUN}/containerd.sock"
SCHEDULER_PORT="${TERRACE_SCHEDULER_PORT:-20259}"
KUBELET_PORT="${TERRACE_KUBELET_PORT:-10250}"
KUBELET_HEALTHZ_PORT="${TERRACE_KUBELET_HEALTHZ_PORT:-20248}"
KUBE_PROXY_HEALTHZ_PORT="${TERRACE_KUBE_PROXY_HEALTHZ_PORT:-20256}"
KUBE_PROXY_METRICS_PORT="${TERRACE_KUBE_PROXY_METRICS_PORT:-20249}"
COREDNS_HEALTH_PORT="${TERRACE_COREDNS_HEALTH_PORT:-20281}"
COREDNS_READY_PORT="${TERRACE_COREDNS_READY_PORT:-20282}"
RELAY_HEALTH_PORT="${TERRACE_RELAY_HEALTH_PORT:-20283}"
# The tag of the images hack/tools/images builds (pause, base, webserver).
NODE_IMAGE_TAG="v1"
NODE_FORWARD_CHAIN="TERRACE-NODE-FORWARD"

# NODE_COMPONENTS: the node's processes, in the order of start.
# shellcheck disable=SC2034 # hack/local-env.sh lists them.
NODE_COMPONENTS=(relay kube-scheduler containerd kubelet kube-proxy coredns)

node_enabled() { [[ "${NODE_WANTED}" == 1 ]]; }

# node_started: a node was started from this state directory (make down
# cleans it up whether or not NODE=1 is given again).
node_started() { [[ -f "${NODE_DIR}/started" ]]; }

# node_image NAME: the reference, by digest, of the node's image NAME as last
# pushed (from .local/node/images): a tag may still name an older build in
# containerd's store, a digest never does.
node_image() { awk -v n="$1" '$1 == n { print $2 }' "${NODE_DIR}/images"; }

# node_authorization_modes: with a node, the node authorizer before RBAC, so
# the kubelet may read only what its own pods need.
# A node that runs keeps them when a plain make up restarts kube-apiserver.
node_authorization_modes() { if node_enabled || node_started; then echo Node,RBAC; else echo RBAC; fi; }

# node_apiserver_flags: what else kube-apiserver needs for a node:
# NodeRestriction (the kubelet may change only its own Node and pods), a
# client certificate to reach the kubelet (logs, exec) at its IP (the node's
# name resolves nowhere), and the node's IP as the address of the
# "kubernetes" Service, where relay relays pods to kube-apiserver
# on loopback (these flags come after the plain ones and win).
node_apiserver_flags() {
  node_enabled || node_started || return 0
  printf '%s\n' --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "${PKI}/admin.crt" --kubelet-client-key "${PKI}/admin.key" \
    --kubelet-preferred-address-types InternalIP \
    --advertise-address "${NODE_IP}" --endpoint-reconciler-type lease
}

# node_restart_apiserver: a kube-apiserver started without the node's flags
# (by a plain make up, or an older version of them) is restarted with them.
node_restart_apiserver() {
  node_enabled && running kube-apiserver || return 0
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$(pid_of kube-apiserver)/cmdline")"
  [[ "${cmdline} " == *"--authorization-mode Node,RBAC "*"$(node_apiserver_flags | tr '\n' ' ')"* ]] && return 0
  log "kube-apiserver runs without the node's flags; restarting it"
  stop kube-apiserver
}

# --- preflight -----------------------------------------------------------------

# node_install_packages installs what the node needs from the distribution.
node_install_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  command -v iptables >/dev/null || missing+=(iptables)
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null || die "the node needs ${missing[*]}: install them with your distribution's package manager"
  log "installing ${missing[*]}"
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y "${missing[@]}" >/dev/null; } ||
    die "installing ${missing[*]} failed: run apt-get install ${missing[*]}"
}

node_require_root() {
  [[ "$(id -u)" == 0 ]] || die "make up NODE=1 needs root (it mounts file systems, creates network devices and iptables rules): run it as root, or use make up without NODE=1"
}

node_preflight() {
  node_require_root
  local b
  for b in kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr coredns images/build-images images/relay cni/bridge; do
    [[ -x "${NODE_BIN}/${b}" ]] || die "${NODE_BIN}/${b} missing: run make build-node"
  done
  node_install_packages
  grep -qw overlay /proc/filesystems || die "the kernel has no overlay file system (containerd's snapshotter needs it): modprobe overlay, or use a kernel with CONFIG_OVERLAY_FS"
  [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || die "no memory cgroup controller is mounted under /sys/fs/cgroup: the kubelet needs cgroups"
  if [[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
    modprobe br_netfilter 2>/dev/null || true
    [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || die "the kernel has no br_netfilter (Services between pods on the bridge need it): modprobe br_netfilter, or use a kernel with CONFIG_BRIDGE_NETFILTER"
  fi
  iptables -t nat -L -n >/dev/null 2>&1 || die "iptables cannot read the nat table: the kernel lacks NAT support (CONFIG_NF_NAT) that kube-proxy needs"
  [[ "${POD_SUBNET}" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.0/24$ ]] || die "TERRACE_POD_SUBNET must be a /24 ending in .0, got ${POD_SUBNET}"
}

# --- certificates --------------------------------------------------------------

# node_cert NAME SUBJECT [SAN]: a certificate signed by the local CA, made once.
node_cert() {
  local name="$1" subject="$2" san="${3:-}"
  [[ -f "${PKI}/${name}.crt" ]] && return 0
  (
    cd "${PKI}" || exit 1
    if [[ -n "${san}" ]]; then
      printf 'subjectAltName = %s\nextendedKeyUsage = serverAuth\n' "${san}" >"${name}.ext"
    else
      printf 'extendedKeyUsage = clientAuth\n' >"${name}.ext"
    fi
    openssl req -newkey rsa:2048 -nodes -keyout "${name}.key" -out "${name}.csr" -subj "${subject}" 2>/dev/null
    openssl x509 -req -in "${name}.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "${name}.crt" \
      -days 3650 -extfile "${name}.ext" 2>/dev/null
    rm -f "${name}.csr" "${name}.ext"
  )
}

node_pki() {
  node_cert kubelet "/O=system:nodes/CN=system:node:${NODE_NAME}"
  node_cert kubelet-serving "/CN=${NODE_NAME}" "IP:${NODE_IP}, DNS:${NODE_NAME}"
  node_cert kube-scheduler "/CN=system:kube-scheduler"
  node_cert kube-proxy "/CN=system:kube-proxy"
  node_cert coredns "/CN=terrace-coredns"
  local c
  for c in kubelet kube-scheduler kube-proxy coredns; do
    write_kubeconfig "${NODE_DIR}/${c}.kubeconfig" "${c}" "${c}" "${c}"
  done
}

# --- network -------------------------------------------------------------------

# node_network_up: the bridge (made before the first pod, as the node's IP
# must exist when the kubelet starts), forwarding for Services, and a rule
# that drops whatever a pod sends to an address off the node.
node_network_up() {
  if ! ip link show "${NODE_BRIDGE}" >/dev/null 2>&1; then
    ip link add "${NODE_BRIDGE}" type bridge || die "cannot create the bridge ${NODE_BRIDGE}: the kernel needs bridge support (CONFIG_BRIDGE)"
  fi
  ip addr replace "${NODE_IP}/24" dev "${NODE_BRIDGE}"
  ip link set "${NODE_BRIDGE}" up
  [[ -f "${NODE_DIR}/ip_forward.before" ]] || cat /proc/sys/net/ipv4/ip_forward >"${NODE_DIR}/ip_forward.before"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  iptables -N "${NODE_FORWARD_CHAIN}" 2>/dev/null || iptables -F "${NODE_FORWARD_CHAIN}"
  iptables -A "${NODE_FORWARD_CHAIN}" -s "${POD_SUBNET}" ! -d "${POD_SUBNET}" -j DROP \
    -m comment --comment "terrace-node: pods reach nothing off the node"
  iptables -C FORWARD -j "${NODE_FORWARD_CHAIN}" 2>/dev/null || iptables -I FORWARD 1 -j "${NODE_FORWARD_CHAIN}"
  mkdir -p "${NODE_DIR}/cni/net.d" "${NODE_DIR}/cni/ipam"
  # Routes to the pods' subnet and the Services' only: no default route.
  cat >"${NODE_DIR}/cni/net.d/10-terrace.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "terrace",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${NODE_BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${NODE_DIR}/cni/ipam",
        "ranges": [[{"subnet": "${POD_SUBNET}", "gateway": "${NODE_IP}"}]],
        "routes": [{"dst": "${POD_SUBNET}"}, {"dst": "${SERVICE_SUBNET}"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

# node_remove_chains REGEX removes the iptables chains whose names match REGEX,
# in every table, with the rules that jump to them.
node_remove_chains() {
  local table chain rule
  for table in filter nat mangle raw; do
    local chains
    chains="$(iptables -t "${table}" -S 2>/dev/null | awk -v re="$1" '$1 == "-N" && $2 ~ re { print $2 }')"
    [[ -n "${chains}" ]] || continue
    for chain in ${chains}; do
      iptables -t "${table}" -S 2>/dev/null | awk -v c="${chain}" '$1 == "-A" && $0 ~ ("-j " c "( |$)") { $1 = "-D"; print }' |
        while read -r rule; do eval "iptables -t ${table} ${rule}" 2>/dev/null || true; done
    done
    for chain in ${chains}; do iptables -t "${table}" -F "${chain}" 2>/dev/null || true; done
    for chain in ${chains}; do iptables -t "${table}" -X "${chain}" 2>/dev/null || true; done
  done
}

node_network_down() {
  if iptables -C FORWARD -j "${NODE_FORWARD_CHAIN}" 2>/dev/null; then
    iptables -D FORWARD -j "${NODE_FORWARD_CHAIN}"
  fi
  if iptables -F "${NODE_FORWARD_CHAIN}" 2>/dev/null; then iptables -X "${NODE_FORWARD_CHAIN}" || true; fi
  # What kube-proxy's own cleanup, the kubelet and the portmap plugin (hostPort
  # pods) left.
  node_remove_chains '^(KUBE|CNI)-'
  ip link del "${NODE_BRIDGE}" 2>/dev/null || true
  if [[ -f "${NODE_DIR}/ip_forward.before" ]]; then
    cat "${NODE_DIR}/ip_forward.before" >/proc/sys/net/ipv4/ip_forward
    rm -f "${NODE_DIR}/ip_forward.before"
  fi
}

# --- images --------------------------------------------------------------------

# node_images pushes the node's images (pause for every pod sandbox, base and
# webserver for workloads, relay for the pods of make deploy-local) to the
# local registry; unchanged images push nothing.
node_images() {
  log "pushing the node's images to the local registry"
  "${NODE_BIN}/images/build-images" --registry "$(cat "${REGISTRY_DIR}/address")" --repository terrace \
    --tag "${NODE_IMAGE_TAG}" --image "pause=${NODE_BIN}/images/pause" \
    --image "webserver=${NODE_BIN}/images/webserver" --image "relay=${NODE_BIN}/images/relay" >"${NODE_DIR}/images" 2>"${LOGS}/images.log" ||
    die "building or pushing the node's images failed; see ${LOGS}/images.log"
}

# --- processes -----------------------------------------------------------------

# node_config NAME FILE writes standard input to FILE when it differs from
# what FILE holds, and then stops NAME so that it starts with it (kube-proxy
# exits by itself when its file is written, even with the same content).
node_config() {
  local name="$1" file="$2" want
  want="$(cat)"
  [[ -f "${file}" && "$(cat "${file}")" == "${want}" ]] && return 0
  if running "${name}"; then
    stop "${name}"
    # A process that just exited may still hold its ports for a moment.
    local port
    for port in ${LISTEN_PORTS[${name}]:-}; do
      for _ in $(seq 1 50); do port_taken "${port}" || break; sleep 0.2; done
    done
  fi
  printf '%s\n' "${want}" >"${file}"
}

containerd_config() {
  local registry
  registry="$(cat "${REGISTRY_DIR}/address")"
  # The local registry speaks plain HTTP.
  mkdir -p "${NODE_DIR}/certs.d/${registry}"
  cat >"${NODE_DIR}/certs.d/${registry}/hosts.toml" <<TOML
server = "http://${registry}"

[host."http://${registry}"]
  capabilities = ["pull", "resolve"]
TOML
  # restrict_oom_score_adj: without CAP_SYS_RESOURCE (as in many VMs and
  # containers) every sandbox would fail setting its oom_score_adj.
  node_config containerd "${NODE_DIR}/containerd.toml" <<TOML
version = 3
root = "${NODE_DIR}/containerd"
state = "${NODE_RUN}/containerd"

[grpc]
  address = "${CONTAINERD_SOCK}"

[ttrpc]
  address = "${CONTAINERD_SOCK}.ttrpc"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$(node_image pause)"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "${NODE_DIR}/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "${NODE_RUN}/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["${NODE_BIN}/cni"]
    conf_dir = "${NODE_DIR}/cni/net.d"
TOML
}

kubelet_config() {
  # failCgroupV1: false: many VMs still mount cgroup v1 controllers.
  # Eviction thresholds are low: a shared development disk is often fuller
  # than a dedicated node's.
  node_config kubelet "${NODE_DIR}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${CONTAINERD_SOCK}
address: ${NODE_IP}
port: ${KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${KUBELET_HEALTHZ_PORT}
tlsCertFile: ${PKI}/kubelet-serving.crt
tlsPrivateKeyFile: ${PKI}/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
clusterDNS: [${NODE_IP}]
resolvConf: ""
podLogsDir: ${NODE_DIR}/pod-logs
podCIDR: ${POD_SUBNET}
rotateCertificates: false
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
}

kube_proxy_config() {
  node_config kube-proxy "${NODE_DIR}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_SUBNET}
clientConnection:
  kubeconfig: ${NODE_DIR}/kube-proxy.kubeconfig
healthzBindAddress: 127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT}
metricsBindAddress: 127.0.0.1:${KUBE_PROXY_METRICS_PORT}
nodePortAddresses: ["${NODE_IP}/32"]
conntrack:
  maxPerCore: 0
YAML
}

coredns_config() {
  node_config coredns "${NODE_DIR}/Corefile" <<COREFILE
.:53 {
  bind ${NODE_IP}
  errors
  health 127.0.0.1:${COREDNS_HEALTH_PORT}
  ready 127.0.0.1:${COREDNS_READY_PORT}
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig ${NODE_DIR}/coredns.kubeconfig terrace-local
    pods insecure
  }
  cache 30
}
COREFILE
}

# node_rbac: CoreDNS reads Services, EndpointSlices, Namespaces and Pods.
node_rbac() {
  kubectl_admin create clusterrole terrace-node-coredns --verb list,watch \
    --resource services,endpointslices.discovery.k8s.io,namespaces,pods --dry-run=client -o yaml |
    kubectl_admin apply --server-side --force-conflicts -f - >/dev/null
  kubectl_admin create clusterrolebinding terrace-node-coredns --clusterrole terrace-node-coredns \
    --user terrace-coredns --dry-run=client -o yaml | kubectl_admin apply --server-side --force-conflicts -f - >/dev/null
}

# node_abort removes a node that failed to start (its logs stay), so no
# half-started node is left behind; the control plane keeps running.
node_abort() {
  local status=$?
  ((status == 0)) && return 0
  log "the node did not start; removing what it started (logs stay in ${LOGS})"
  # die exits: node_down must not be cut short by a second failure.
  (node_down) || true
  exit "${status}"
}

node_up() {
  log "starting the node ${NODE_NAME} (pods on ${POD_SUBNET}, node IP ${NODE_IP})"
  mkdir -p "${NODE_DIR}" "${NODE_RUN}"
  touch "${NODE_DIR}/started"
  trap node_abort EXIT
  node_pki
  node_rbac
  # The node's processes create files that pods read as non-root users (their
  # resolv.conf, say): not the owner-only mask the kubeconfigs were written with.
  umask 022
  node_network_up
  node_images

  # kube-apiserver and the registry listen on loopback, which pods cannot
  # reach: relay opens them at the node's IP (kube-apiserver's there is
  # the "kubernetes" Service's endpoint), TLS untouched.
  LISTEN_PORTS["relay"]="${RELAY_HEALTH_PORT}"
  start relay "${NODE_BIN}/images/relay" \
    -forward "${NODE_IP}:${APISERVER_PORT}=127.0.0.1:${APISERVER_PORT}" \
    -forward "${NODE_IP}:${REGISTRY_PORT}=127.0.0.1:${REGISTRY_PORT}" \
    -health-address "127.0.0.1:${RELAY_HEALTH_PORT}"
  wait_for relay 30 curl -sf "http://127.0.0.1:${RELAY_HEALTH_PORT}/healthz"

  LISTEN_PORTS["kube-scheduler"]="${SCHEDULER_PORT}"
  start kube-scheduler "${NODE_BIN}/kube-scheduler" \
    --kubeconfig "${NODE_DIR}/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "${NODE_DIR}/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "${NODE_DIR}/kube-scheduler.kubeconfig" \
    --authentication-skip-lookup \
    --bind-address 127.0.0.1 --secure-port "${SCHEDULER_PORT}" --leader-elect=false
  wait_for kube-scheduler 60 curl -skf "https://127.0.0.1:${SCHEDULER_PORT}/healthz"

  containerd_config
  # The shim is found on PATH.
  PATH="${NODE_BIN}:${PATH}" start containerd "${NODE_BIN}/containerd" --config "${NODE_DIR}/containerd.toml"
  wait_for containerd 60 "${NODE_BIN}/ctr" --address "${CONTAINERD_SOCK}" version

  LISTEN_PORTS["kubelet"]="${KUBELET_HEALTHZ_PORT}"
  kubelet_config
  start kubelet "${NODE_BIN}/kubelet" --config "${NODE_DIR}/kubelet.yaml" \
    --kubeconfig "${NODE_DIR}/kubelet.kubeconfig" --root-dir "${NODE_DIR}/kubelet" \
    --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}"
  wait_for kubelet 120 curl -sf "http://127.0.0.1:${KUBELET_HEALTHZ_PORT}/healthz"

  LISTEN_PORTS["kube-proxy"]="${KUBE_PROXY_HEALTHZ_PORT} ${KUBE_PROXY_METRICS_PORT}"
  kube_proxy_config
  start kube-proxy "${NODE_BIN}/kube-proxy" --config "${NODE_DIR}/kube-proxy.yaml"
  wait_for kube-proxy 60 curl -sf "http://127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT}/healthz"

  LISTEN_PORTS["coredns"]="${COREDNS_HEALTH_PORT} ${COREDNS_READY_PORT}"
  coredns_config
  start coredns "${NODE_BIN}/coredns" -conf "${NODE_DIR}/Corefile"
  wait_for coredns 60 curl -sf "http://127.0.0.1:${COREDNS_READY_PORT}/ready"

  log "waiting for the node ${NODE_NAME} to be Ready"
  wait_for kubelet 120 kubectl_admin wait --for condition=Ready --timeout 5s "node/${NODE_NAME}"
  trap - EXIT
}

# --- teardown ------------------------------------------------------------------

# node_remove_containers kills and removes every container of the node: through
# containerd while it runs, then through runc for what a crashed containerd
# left behind.
node_remove_containers() {
  local ctr=("${NODE_BIN}/ctr" --address "${CONTAINERD_SOCK}" --namespace k8s.io) id
  if running containerd; then
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill --signal SIGKILL "${id}" >/dev/null 2>&1 || true
      "${ctr[@]}" tasks delete --force "${id}" >/dev/null 2>&1 || true
    done
    for id in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" containers rm "${id}" >/dev/null 2>&1 || true
    done
    # The sandboxes' records too, or containerd tries to recover them at its next start.
    for id in $("${ctr[@]}" sandboxes ls 2>/dev/null | awk 'NR > 1 { print $1 }'); do
      "${ctr[@]}" sandboxes rm --force "${id}" >/dev/null 2>&1 || true
    done
  fi
  local runc_root="${NODE_RUN}/runc/k8s.io"
  if [[ -d "${runc_root}" ]]; then
    for id in $(runc --root "${runc_root}" list -q 2>/dev/null); do
      runc --root "${runc_root}" kill --all "${id}" KILL >/dev/null 2>&1 || true
      runc --root "${runc_root}" delete --force "${id}" >/dev/null 2>&1 || true
    done
  fi
}

# node_kill_shims ends the runc shims of this node's containerd (they outlive
# containerd by design), found by their binary.
node_kill_shims() {
  local exe pid
  for exe in /proc/[0-9]*/exe; do
    [[ "$(readlink "${exe}" 2>/dev/null)" == "${NODE_BIN}/containerd-shim-runc-v2" ]] || continue
    pid="${exe#/proc/}"
    kill -KILL "${pid%/exe}" 2>/dev/null || true
  done
}

# node_unmount unmounts everything mounted under the node's directories
# (container root file systems, pod volumes, network namespaces), deepest first.
node_unmount() {
  local dir mnt
  for dir in "${NODE_RUN}" "${NODE_DIR}"; do
    awk -v d="${dir}/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
      while read -r mnt; do umount "${mnt}" 2>/dev/null || umount -l "${mnt}" 2>/dev/null || true; done
  done
}

node_down() {
  node_started || running kubelet || running containerd || return 0
  [[ "$(id -u)" == 0 ]] || die "a node was started from ${LOCAL} (make up NODE=1): stopping it needs root; run make down as root"
  stop coredns
  stop kube-proxy
  # kube-proxy's own cleanup of its iptables rules.
  if [[ -x "${NODE_BIN}/kube-proxy" ]]; then "${NODE_BIN}/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  stop kubelet
  node_remove_containers
  stop containerd
  node_kill_shims
  stop kube-scheduler
  stop relay
  node_unmount
  node_network_down
  # The kubelet links every container's log into /var/log/containers.
  local link
  for link in /var/log/containers/*.log; do
    [[ "$(readlink "${link}" 2>/dev/null)" == "${NODE_DIR}/pod-logs/"* ]] && rm -f "${link}"
  done
  rm -rf "${NODE_RUN}" "${NODE_DIR}/cni/ipam"
  rm -f "${NODE_DIR}/started"
  log "stopped the node ${NODE_NAME}"
}
