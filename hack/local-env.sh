#!/usr/bin/env bash
# The local environment: a real control plane (etcd, kube-apiserver,
# kube-controller-manager) on loopback and every Terrace controller as its own
# process, each authenticated as its own ServiceAccount bound to its own
# generated ClusterRole (config/rbac/<binary>/role.yaml), so missing RBAC fails
# here exactly as in a real cluster; beside them an OCI distribution registry
# (plain HTTP on loopback) for charts and artifacts. No Docker needed.
#
#   hack/local-env.sh up      start (or recover) everything; returns when healthy
#   hack/local-env.sh down    stop exactly what `up` started
#   hack/local-env.sh status  show what runs
#   hack/local-env.sh clean   down, then remove all state (.local/)
#
# With TERRACE_NODE=1 (make up NODE=1; needs root) it also starts a real node,
# terrace-node, that runs pods: see hack/node-env.sh. `down` stops a node that
# was started whether or not TERRACE_NODE=1 is given.
#
# up, down and clean of one state directory run one at a time (a lock file,
# .lock, taken with flock): an up waits for a down still in progress.
#
# State lives in .local/ (TERRACE_LOCAL_DIR overrides it, so the e2e suite and
# `make bench` can run their own environment beside yours, on other ports):
# pki/, etcd/, logs/<component>.log, pids/<component>.pid, pids/<component>.sha256 (the binary it
# runs, see same_binary), pids/<binary>.ports
# ("<metrics-port> <health-port>"), kubeconfig (admin), kubeconfigs/<binary>.kubeconfig,
# registry/ (config.yml, address, data/: the registry's blobs and manifests).
# Controllers inherit the environment, so OTEL_* and TERRACE_TRACES_FILE turn
# tracing on for all of them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${TERRACE_LOCAL_DIR:-${ROOT}/.local}"
PKI="${LOCAL}/pki"
LOGS="${LOCAL}/logs"
PIDS="${LOCAL}/pids"
K8S_BIN="${ROOT}/bin/k8s"
BIN="${ROOT}/bin"
REGISTRY_BIN="${BIN}/registry"
REGISTRY_DIR="${LOCAL}/registry"
KUBECONFIG_ADMIN="${LOCAL}/kubeconfig"

# Ports (loopback only). Override with environment variables when they clash.
ETCD_PORT="${TERRACE_ETCD_PORT:-22379}"
ETCD_PEER_PORT="${TERRACE_ETCD_PEER_PORT:-22380}"
APISERVER_PORT="${TERRACE_APISERVER_PORT:-26443}"
KCM_PORT="${TERRACE_KCM_PORT:-20257}"
# Next to etcd's two ports by default, so an environment that moves etcd (the
# e2e suite, make bench) moves its registry with it.
REGISTRY_PORT="${TERRACE_REGISTRY_PORT:-$((ETCD_PORT + 2))}"
CONTROLLER_PORT_BASE="${TERRACE_CONTROLLER_PORT_BASE:-28080}"
# Set to serve each controller's /debug/pprof on 127.0.0.1:<base + index>
# (the order of TERRACE_BINARIES); unset, profiling stays off.
PPROF_PORT_BASE="${TERRACE_PPROF_PORT_BASE:-}"

NAMESPACE="terrace-system"
# shellcheck source=components.sh
source "${ROOT}/hack/components.sh"
CONTROLLERS=("${TERRACE_BINARIES[@]}")
# COMPONENTS: every process of the environment, in the order of start.
COMPONENTS=(etcd kube-apiserver kube-controller-manager registry "${CONTROLLERS[@]}")
# shellcheck source=node-env.sh
source "${ROOT}/hack/node-env.sh"
if node_enabled || node_started; then COMPONENTS+=("${NODE_COMPONENTS[@]}"); fi
# shellcheck source=deploy-local-env.sh
source "${ROOT}/hack/deploy-local-env.sh"

log() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

kubectl_admin() { kubectl --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }

# --- processes ---------------------------------------------------------------

pid_of() { [[ -f "${PIDS}/$1.pid" ]] && cat "${PIDS}/$1.pid" || true; }

# running NAME: the recorded process exists, is not a zombie, and still runs
# NAME's binary (after a reboot the PID may belong to something else).
running() {
  local pid state
  pid="$(pid_of "$1")"
  [[ -n "${pid}" && -r "/proc/${pid}/stat" ]] || return 1
  state="$(awk '{ print $3 }' "/proc/${pid}/stat" 2>/dev/null)" || return 1
  [[ "${state}" != "Z" ]] || return 1
  # Read the command line whole and match in bash: `| grep -q` would exit at the
  # first match and, under pipefail, tr's SIGPIPE would make a match a miss.
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null)" || return 1
  [[ "${cmdline} " == *"/$1 "* ]]
}

# started_at PID: the process's start time, in seconds since the epoch.
started_at() {
  local ticks btime
  # Field 22 of /proc/PID/stat (after the command in parentheses, which may
  # hold spaces): clock ticks since boot.
  ticks="$(sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $20 }')"
  btime="$(awk '/^btime/ { print $2 }' /proc/stat)"
  echo $((btime + ticks / $(getconf CLK_TCK)))
}

# digest FILE: the SHA-256 of FILE's content.
digest() { sha256sum "$1" | cut -d' ' -f1; }

# same_binary NAME FILE: whether the running NAME was started from FILE's
# current content. By content, not modification time: `make up` runs
# `go build -o` every time, which writes the file anew even when nothing
# changed. (A process started before digests were recorded falls back to the
# time check.)
same_binary() {
  local name="$1" file="$2" recorded="${PIDS}/$1.sha256"
  if [[ -f "${recorded}" ]]; then
    [[ "$(digest "${file}")" == "$(cat "${recorded}")" ]]
  else
    [[ "$(stat -c %Y "${file}")" -le "$(started_at "$(pid_of "${name}")")" ]]
  fi
}

# start NAME CMD...: starts CMD in the background (its own session, so a
# terminal's Ctrl-C does not reach it), logs to .local/logs/NAME.log. A
# process already running is kept, unless its binary changed since it
# started (make up after a code change): then it is restarted.
# LISTEN_PORTS[NAME] lists the ports the process NAME listens on, for start
# to check that they are free.
declare -A LISTEN_PORTS=()

# port_taken PORT: something listens on the loopback port PORT.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_holder PORT: " (<process>)" naming what listens on PORT, when ss can
# tell; nothing otherwise.
port_holder() {
  command -v ss >/dev/null || return 0
  local out
  out="$(ss -Hltnp "sport = :$1" 2>/dev/null)" || return 0
  [[ "${out}" =~ users:\(\(([^\)]*)\)\) ]] && printf ' (%s)' "${BASH_REMATCH[1]}"
  return 0
}

start() {
  local name="$1"; shift
  if running "${name}"; then
    if same_binary "${name}" "$1"; then
      log "${name} already running (pid $(pid_of "${name}"))"
      return
    fi
    log "${name}: $1 changed since the running process started; restarting it"
    stop "${name}"
  fi
  # A port taken by another program: the process could not listen there,
  # and a readiness check of the port would ask the other program.
  local port
  for port in ${LISTEN_PORTS[${name}]:-}; do
    port_taken "${port}" && die "port ${port}, where ${name} listens, is taken by another program$(port_holder "${port}"); stop it, or choose other TERRACE_*_PORT* values (see the top of this script)"
  done
  # Recorded before the start: a binary rewritten right after it would then
  # count as changed at the next `make up`, never the other way round.
  digest "$1" >"${PIDS}/${name}.sha256"
  # 9>&-: the process must not inherit the lock (see lock), or the next
  # command would wait for it as long as the process runs.
  setsid "$@" >>"${LOGS}/${name}.log" 2>&1 </dev/null 9>&- &
  echo $! >"${PIDS}/${name}.pid"
  log "started ${name} (pid $!, log ${LOGS}/${name}.log)"
}

stop() {
  local name="$1" pid
  pid="$(pid_of "${name}")"
  if running "${name}"; then
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 100); do running "${name}" || break; sleep 0.1; done
    if running "${name}"; then
      kill -KILL "${pid}" 2>/dev/null || true
      # Gone before stop returns: a start right after it checks that the
      # process's ports are free, and must not find the process itself there.
      for _ in $(seq 1 50); do running "${name}" || break; sleep 0.1; done
    fi
    log "stopped ${name}"
  fi
  rm -f "${PIDS}/${name}.pid" "${PIDS}/${name}.sha256"
}

# wait_for NAME SECONDS CMD...: retries CMD (NAME's readiness check) until it
# succeeds, and fails at once when the process NAME is not running: a check
# against a port passes for whatever answers there (another program that
# took the port NAME could not bind, say), so it counts only while NAME runs.
wait_for() {
  local name="$1" seconds="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until running "${name}" && "$@" >/dev/null 2>&1; do
    # Asked again after a moment before it counts as exited: right after
    # start the recorded PID may still be the forked shell, not yet NAME.
    running "${name}" || { sleep 0.2; running "${name}"; } || die "${name} exited; the end of ${LOGS}/${name}.log:
$(tail -n 5 "${LOGS}/${name}.log" 2>/dev/null)"
    if ((SECONDS >= deadline)); then
      die "${name} not ready after ${seconds}s; see ${LOGS}/${name}.log"
    fi
    sleep 0.5
  done
}

# warn_ephemeral_ports warns of the ports chosen (TERRACE_*_PORT*) that lie in
# the kernel's range of ephemeral ports: any outgoing connection (the
# processes' own, to etcd or kube-apiserver) may take one of them as its
# source port first, and the process that should listen there cannot start.
warn_ephemeral_ports() {
  local lo hi
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
  local ports=("${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${KCM_PORT}" "${REGISTRY_PORT}"
    "${CONTROLLER_PORT_BASE}" "$((CONTROLLER_PORT_BASE + 2 * ${#CONTROLLERS[@]} - 1))")
  local p
  for p in "${ports[@]}"; do
    if ((p >= lo && p <= hi)); then
      log "warning: port ${p} lies in this machine's ephemeral port range (${lo}-${hi}): a process may fail to bind it; choose TERRACE_*_PORT* values below ${lo}"
      return
    fi
  done
}

# --- certificates ------------------------------------------------------------

ensure_pki() {
  mkdir -p "${PKI}"
  [[ -f "${PKI}/ca.crt" ]] && return
  log "generating certificates in ${PKI}"
  (
    cd "${PKI}"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=terrace-local-ca" 2>/dev/null
    # kube-apiserver serving certificate, valid for loopback and the in-cluster names.
    cat >apiserver.ext <<EOF
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, IP:10.0.0.1
extendedKeyUsage = serverAuth
EOF
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt \
      -days 3650 -extfile apiserver.ext 2>/dev/null
    # Client certificates: the admin (system:masters) and kube-controller-manager.
    client_cert() {
      printf 'extendedKeyUsage = clientAuth\n' >client.ext
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days 3650 -extfile client.ext 2>/dev/null
    }
    client_cert admin "/O=system:masters/CN=terrace-admin"
    client_cert kube-controller-manager "/CN=system:kube-controller-manager"
    # ServiceAccount token signing key pair.
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext
  )
}

# write_kubeconfig FILE USER [cert key | token TOKEN]
write_kubeconfig() {
  local file="$1" user="$2"
  shift 2
  local cred
  if [[ "$1" == "token" ]]; then
    cred="    token: $2"
  else
    cred="    client-certificate: ${PKI}/$1.crt
    client-key: ${PKI}/$1.key"
  fi
  umask 077
  cat >"${file}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: terrace-local
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority: ${PKI}/ca.crt
users:
- name: ${user}
  user:
${cred}
contexts:
- name: terrace-local
  context: {cluster: terrace-local, user: ${user}}
current-context: terrace-local
EOF
}

# --- control plane -----------------------------------------------------------

start_control_plane() {
  LISTEN_PORTS[etcd]="${ETCD_PORT} ${ETCD_PEER_PORT}"
  start etcd "${K8S_BIN}/etcd" \
    --data-dir "${LOCAL}/etcd" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster "default=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync
  wait_for etcd 60 curl -sf "http://127.0.0.1:${ETCD_PORT}/health"

  # --endpoint-reconciler-type none: the advertise address is loopback, which
  # the "kubernetes" Service's Endpoints may not hold (kube-apiserver logged
  # that every 10 s); nothing here runs pods that would use that Service.
  LISTEN_PORTS[kube-apiserver]="${APISERVER_PORT}"
  local node_flags=()
  mapfile -t node_flags < <(node_apiserver_flags)
  start kube-apiserver "${K8S_BIN}/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${APISERVER_PORT}" \
    --tls-cert-file "${PKI}/apiserver.crt" --tls-private-key-file "${PKI}/apiserver.key" \
    --client-ca-file "${PKI}/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "${PKI}/sa.pub" \
    --service-account-signing-key-file "${PKI}/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode "$(node_authorization_modes)" \
    --allow-privileged=true \
    --endpoint-reconciler-type none "${node_flags[@]}"
  write_kubeconfig "${KUBECONFIG_ADMIN}" terrace-admin admin admin
  wait_for kube-apiserver 120 kubectl_admin get --raw /readyz

  write_kubeconfig "${LOCAL}/kube-controller-manager.kubeconfig" system:kube-controller-manager kube-controller-manager kube-controller-manager
  # --authentication-skip-lookup: kube-apiserver has no front-proxy CA, and
  # kube-controller-manager logged its absence from the cluster's
  # authentication ConfigMap every few seconds; its own endpoint (healthz
  # only, here) needs no request-header authentication.
  LISTEN_PORTS[kube-controller-manager]="${KCM_PORT}"
  start kube-controller-manager "${K8S_BIN}/kube-controller-manager" \
    --kubeconfig "${LOCAL}/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "${LOCAL}/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "${LOCAL}/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "${KCM_PORT}" \
    --service-account-private-key-file "${PKI}/sa.key" \
    --root-ca-file "${PKI}/ca.crt" \
    --use-service-account-credentials \
    --authentication-skip-lookup \
    --leader-elect=false
  wait_for kube-controller-manager 60 curl -skf "https://127.0.0.1:${KCM_PORT}/healthz"
}

# --- OCI registry ------------------------------------------------------------

# registry_config SECRET: the registry's configuration: plain HTTP on loopback,
# blobs and manifests on disk under .local/registry/data.
registry_config() {
  cat <<EOF
version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: ${REGISTRY_DIR}/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:${REGISTRY_PORT}
  secret: $1
EOF
}

start_registry() {
  mkdir -p "${REGISTRY_DIR}/data"
  # The upload secret stays the same across restarts: an upload begun before
  # a restart of the registry can still be finished after it.
  local secret_file="${REGISTRY_DIR}/http-secret"
  [[ -s "${secret_file}" ]] || (umask 077 && openssl rand -hex 32 >"${secret_file}")
  local config="${REGISTRY_DIR}/config.yml" want
  want="$(registry_config "$(cat "${secret_file}")")"
  if [[ ! -f "${config}" || "$(cat "${config}")" != "${want}" ]]; then
    # The registry reads its configuration only when it starts.
    stop registry
    (umask 077 && printf '%s\n' "${want}" >"${config}")
  fi
  echo "127.0.0.1:${REGISTRY_PORT}" >"${REGISTRY_DIR}/address"
  # The registry exports traces by OTLP to localhost unless told otherwise:
  # off, unless the caller configured tracing (as for the controllers).
  local traces="none"
  [[ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]] && traces="otlp"
  LISTEN_PORTS[registry]="${REGISTRY_PORT}"
  OTEL_TRACES_EXPORTER="${OTEL_TRACES_EXPORTER:-${traces}}" start registry "${REGISTRY_BIN}" serve "${config}"
  wait_for registry 30 curl -sf "http://127.0.0.1:${REGISTRY_PORT}/v2/"
}

# --- Terrace -----------------------------------------------------------------

install_terrace() {
  log "installing CRDs"
  kubectl_admin apply --server-side --force-conflicts -f "${ROOT}/apis/config/crd/bases" >/dev/null
  kubectl_admin wait --for condition=Established --timeout 60s -f "${ROOT}/apis/config/crd/bases" >/dev/null
  # Server-side, as every apply here (and config/default's dry run in the
  # smoke test): a client-side apply's last-applied annotation would make
  # each later server-side apply of the same objects warn about migrating it.
  kubectl_admin create namespace "${NAMESPACE}" --dry-run=client -o yaml | kubectl_admin apply --server-side --force-conflicts -f - >/dev/null
  # Each binary's ClusterRole is generated from its +kubebuilder:rbac markers.
  kubectl_admin apply --server-side --force-conflicts -f "${ROOT}/config/rbac/" -R >/dev/null
  # What RBAC cannot say (hand-written admission policies, config/policies/<binary>.yaml).
  kubectl_admin apply --server-side --force-conflicts -f "${ROOT}/config/policies/" >/dev/null
  mkdir -p "${LOCAL}/kubeconfigs"
  for c in "${CONTROLLERS[@]}"; do
    kubectl_admin -n "${NAMESPACE}" create serviceaccount "${c}" --dry-run=client -o yaml | kubectl_admin apply --server-side --force-conflicts -f - >/dev/null
    kubectl_admin create clusterrolebinding "terrace-${c}" --clusterrole "terrace-${c}" \
      --serviceaccount "${NAMESPACE}:${c}" --dry-run=client -o yaml | kubectl_admin apply --server-side --force-conflicts -f - >/dev/null
    local token
    token="$(kubectl_admin -n "${NAMESPACE}" create token "${c}" --duration 8760h)"
    write_kubeconfig "${LOCAL}/kubeconfigs/${c}.kubeconfig" "${c}" token "${token}"
  done
}

# loopback_flags BINARY prints, one per line, the flags that let BINARY
# reach loopback addresses, those of the flags it knows: the deployers refuse
# loopback Targets and registries unless told otherwise, and here every
# Target and registry is on 127.0.0.1 (the processes' and, through the relay,
# the pods' of make deploy-local).
loopback_flags() {
  local help
  help="$("${BIN}/$1" --help 2>&1 || true)"
  [[ "${help}" != *--allow-loopback-targets* ]] || echo --allow-loopback-targets
  [[ "${help}" != *--allow-loopback-registries* ]] || echo --allow-loopback-registries
}

start_controllers() {
  local i=0
  for c in "${CONTROLLERS[@]}"; do
    [[ -x "${BIN}/${c}" ]] || die "${BIN}/${c} missing: run make build"
    local metrics=$((CONTROLLER_PORT_BASE + 2 * i)) health=$((CONTROLLER_PORT_BASE + 2 * i + 1))
    local pprof=0
    [[ -n "${PPROF_PORT_BASE}" ]] && pprof="127.0.0.1:$((PPROF_PORT_BASE + i))"
    local extra=()
    mapfile -t extra < <(loopback_flags "${c}")
    LISTEN_PORTS["${c}"]="${metrics} ${health}"
    start "${c}" "${BIN}/${c}" \
      --kubeconfig "${LOCAL}/kubeconfigs/${c}.kubeconfig" \
      --metrics-bind-address "127.0.0.1:${metrics}" \
      --health-probe-bind-address "127.0.0.1:${health}" \
      --pprof-bind-address "${pprof}" \
      --log-format console "${extra[@]}"
    echo "${metrics} ${health}" >"${PIDS}/${c}.ports"
    i=$((i + 1))
  done
  for c in "${CONTROLLERS[@]}"; do
    local health
    health="$(cut -d' ' -f2 "${PIDS}/${c}.ports")"
    wait_for "${c}" 60 curl -sf "http://127.0.0.1:${health}/readyz"
  done
}

# --- commands ----------------------------------------------------------------

# lock serialises the commands that start and stop processes in one state
# directory: an `up` started while a `down` still stops the processes (a
# killed test suite's cleanup, say) would otherwise have its new processes
# stopped under it. It waits for the other command (at most 5 minutes).
lock() {
  command -v flock >/dev/null || return 0
  mkdir -p "${LOCAL}"
  exec 9>"${LOCAL}/.lock"
  flock -w 300 9 || die "another hack/local-env.sh command still holds ${LOCAL}/.lock"
}

# require_linux: the scripts manage processes through setsid and /proc.
require_linux() {
  [[ -r /proc/self/stat ]] && command -v setsid >/dev/null ||
    die "the local environment needs Linux (setsid, /proc); on other systems use make kind-up"
}

up() {
  require_linux
  mkdir -p "${LOGS}" "${PIDS}"
  for b in etcd kube-apiserver kube-controller-manager; do
    [[ -x "${K8S_BIN}/${b}" ]] || die "${K8S_BIN}/${b} missing: run make build-control-plane"
  done
  [[ -x "${REGISTRY_BIN}" ]] || die "${REGISTRY_BIN} missing: run make build-registry"
  # Recover from a crash or reboot: forget PID files of processes that are gone.
  for f in "${PIDS}"/*.pid; do
    [[ -e "${f}" ]] || continue
    local name
    name="$(basename "${f}" .pid)"
    running "${name}" || rm -f "${f}"
  done
  warn_ephemeral_ports
  if node_enabled; then node_preflight; fi
  ensure_pki
  node_restart_apiserver
  start_control_plane
  start_registry
  install_terrace
  if deployed_locally; then
    node_enabled || die "Terrace was deployed on the node (make deploy-local): run make up NODE=1, or make undeploy-local to go back to the processes"
    log "Terrace runs on the node (make deploy-local): its controller processes stay stopped"
  else
    start_controllers
  fi
  if node_enabled; then node_up; fi
  status
  # Every process was ready once; one that exited since (a port taken, say)
  # must not be reported as running.
  local c stopped=()
  for c in "${COMPONENTS[@]}"; do
    deployed_locally && [[ " ${CONTROLLERS[*]} " == *" ${c} "* ]] && continue
    running "${c}" || stopped+=("${c}")
  done
  ((${#stopped[@]} == 0)) || die "not running: ${stopped[*]}; see ${LOGS}/<component>.log, then run make up again"
  cat <<EOF

Terrace is running. Point kubectl at it:

  export KUBECONFIG=${KUBECONFIG_ADMIN}
  kubectl get installations,executions,deployitems,deploymenttargetclaims,deploymenttargets -A

OCI registry (plain HTTP, loopback only): 127.0.0.1:${REGISTRY_PORT}
  e.g. oras push --plain-http 127.0.0.1:${REGISTRY_PORT}/demo/artifact:v1 <file>

Logs: ${LOGS}/<component>.log    Stop: make down    Wipe state: make clean-local
EOF
}

down() {
  # The node first, then the controllers, then the control plane in reverse
  # order of start.
  node_down
  local c
  for c in "${CONTROLLERS[@]}"; do stop "${c}"; done
  for c in registry kube-controller-manager kube-apiserver etcd; do stop "${c}"; done
}

status() {
  printf '%-26s %-8s %s\n' COMPONENT PID STATE
  local c
  for c in "${COMPONENTS[@]}"; do
    if deployed_locally && [[ " ${CONTROLLERS[*]} " == *" ${c} "* ]]; then
      printf '%-26s %-8s %s\n' "${c}" - "on the node (make deploy-local)"
    elif running "${c}" && [[ "${c}" == registry ]]; then
      printf '%-26s %-8s %s\n' "${c}" "$(pid_of "${c}")" "running on http://127.0.0.1:${REGISTRY_PORT} (plain HTTP)"
    elif running "${c}"; then
      printf '%-26s %-8s %s\n' "${c}" "$(pid_of "${c}")" running
    else
      printf '%-26s %-8s %s\n' "${c}" - stopped
    fi
  done
}

case "${1:-}" in
  up) if node_enabled; then node_require_root; fi; lock; up ;;
  down) lock; down ;;
  status) status ;;
  clean) lock; down; rm -rf "${LOCAL}"; log "removed ${LOCAL}" ;;
  images) lock; images ;;
  deploy-local) node_require_root; lock; deploy_local ;;
  undeploy-local) lock; undeploy_local ;;
  *) die "usage: $0 up|down|status|clean|images|deploy-local|undeploy-local" ;;
esac
