#!/usr/bin/env bash
# Smoke test of the local node (make test-node; needs root): make up NODE=1,
# a Deployment of the project's own webserver image with a readiness probe
# becomes Available, its Service answers by its DNS name from another pod, a
# manifest deploy item of two replicas ends Succeeded once both are ready,
# the node recovers from a crash of containerd and the kubelet, and make down
# leaves nothing behind: no process, container, mount, network device or
# iptables rule of the node.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${TERRACE_LOCAL_DIR:-${ROOT}/.local}"
export KUBECONFIG="${LOCAL}/kubeconfig" TERRACE_NODE=1
ns="node-smoke-$$"

[[ "$(id -u)" == 0 ]] || { echo "make test-node needs root (the node mounts file systems and creates network devices)" >&2; exit 1; }

cleanup() {
  status=$?
  if ((status != 0)); then
    echo "node smoke test failed; what the cluster and the node's logs say:" >&2
    kubectl get nodes,pods -A -o wide >&2 || true
    kubectl -n "${ns}" get events --sort-by .lastTimestamp >&2 || true
    kubectl -n "${ns}" get deployitems -o jsonpath='{range .items[*]}{.metadata.name}: {.status.phase} {.status.lastError.message}{"\n"}{end}' >&2 || true
    for c in kubelet containerd kube-proxy coredns kube-scheduler; do
      echo "--- ${c}" >&2; tail -n 20 "${LOCAL}/logs/${c}.log" >&2 || true
    done
  fi
  # The deploy item first, while the manifest deployer runs to remove what it applied.
  kubectl -n "${ns}" delete deployitem web-di --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  kubectl delete namespace "${ns}" --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  kubectl delete clusterrolebinding "${ns}-target" --ignore-not-found >/dev/null 2>&1 || true
  "${ROOT}/hack/local-env.sh" down >/dev/null || status=1
  if ((status == 0)); then
    leftovers || status=1
  fi
  exit "${status}"
}
trap cleanup EXIT

# leftovers fails naming whatever the node left behind after make down.
leftovers() {
  local found=()
  ip link show terrace0 >/dev/null 2>&1 && found+=("network device terrace0")
  [[ -e /run/terrace-node ]] && found+=("/run/terrace-node")
  grep -qE " (/run/terrace-node|${LOCAL}/node)/" /proc/self/mountinfo && found+=("mounts under /run/terrace-node or ${LOCAL}/node")
  [[ -n "$(find /var/log/containers -maxdepth 1 -lname "${LOCAL}/node/*" 2>/dev/null)" ]] && found+=("links in /var/log/containers")
  local table
  for table in filter nat mangle; do
    iptables -t "${table}" -S | grep -qE '^-N (KUBE|CNI|TERRACE)-' && found+=("iptables chains in ${table}")
  done
  local exe
  for exe in /proc/[0-9]*/exe; do
    case "$(readlink "${exe}" 2>/dev/null)" in
      "$(realpath -m "${ROOT}/bin/node")/"*) found+=("process ${exe#/proc/}") ;;
    esac
  done
  ((${#found[@]} == 0)) && { echo "make down left nothing of the node behind"; return 0; }
  printf 'make down left behind: %s\n' "${found[@]}" >&2
  return 1
}

"${ROOT}/hack/local-env.sh" up
kubectl wait --for condition=Ready --timeout 60s node/terrace-node
registry="$(cat "${LOCAL}/registry/address")"
# By digest: the tag may name an older build that the node still has.
image="$(awk '$1 == "webserver" { print $2 }' "${LOCAL}/node/images")"
[[ "${image}" == "${registry}/"*@sha256:* ]] || { echo "no webserver image by digest in ${LOCAL}/node/images" >&2; exit 1; }

kubectl create namespace "${ns}"
kubectl -n "${ns}" apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: web
        image: ${image}
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 2
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
YAML
kubectl -n "${ns}" wait --for condition=Available --timeout 180s deployment/web
kubectl -n "${ns}" get pods -o wide
echo "the Deployment of ${image} is Available: its readiness probe passed in both pods"

# Another pod asks the Service by its DNS name (the image has no shell: the
# webserver binary is its own client). It retries: kube-proxy programs the
# Service a moment after the pods are ready.
kubectl -n "${ns}" run client --image "${image}" --restart Never -- -get "http://web.${ns}.svc.cluster.local/" -retry-for 30s
phase=""
for _ in $(seq 1 90); do
  phase="$(kubectl -n "${ns}" get pod client -o jsonpath='{.status.phase}')"
  [[ "${phase}" == Succeeded || "${phase}" == Failed ]] && break
  sleep 1
done
answer="$(kubectl -n "${ns}" logs client 2>&1)"
[[ "${phase}" == Succeeded && "${answer}" == "hello from web-"* ]] ||
  { echo "the client pod is ${phase:-nowhere} (Succeeded wanted, 90s at most); it printed: ${answer}" >&2; exit 1; }
echo "web.${ns}.svc.cluster.local answered from another pod: ${answer}"

# Terrace on the node: a manifest deploy item with a Deployment of two
# replicas ends Succeeded only once its readiness check saw both pods ready.
kubectl -n "${ns}" create serviceaccount target
# This cluster's own admin, as make demo's Target; removed with the test.
kubectl create clusterrolebinding "${ns}-target" --clusterrole cluster-admin --serviceaccount "${ns}:target"
token="$(kubectl -n "${ns}" create token target --duration 1h)"
server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
ca="$(base64 -w0 <"${LOCAL}/pki/ca.crt")"
kubectl -n "${ns}" create secret generic cluster --from-literal=kubeconfig="$(printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster: {server: "%s", certificate-authority-data: "%s"}\nusers:\n- name: target\n  user: {token: "%s"}\ncontexts:\n- name: local\n  context: {cluster: local, user: target}\ncurrent-context: local\n' "${server}" "${ca}" "${token}")"
kubectl -n "${ns}" apply -f - <<YAML
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Target
metadata: {name: cluster}
spec:
  type: landscaper.gardener.cloud/kubernetes-cluster
  secretRef: {name: cluster, key: kubeconfig}
---
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: web-di}
spec:
  type: landscaper.gardener.cloud/kubernetes-manifest
  target: {name: cluster, namespace: ${ns}}
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    manifests:
    - manifest:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web-di, namespace: ${ns}}
        spec:
          replicas: 2
          selector: {matchLabels: {app: web-di}}
          template:
            metadata: {labels: {app: web-di}}
            spec:
              containers:
              - name: web
                image: ${image}
                readinessProbe:
                  httpGet: {path: /healthz, port: 8080}
                  periodSeconds: 2
YAML
kubectl -n "${ns}" wait --for jsonpath='{.status.phase}'=Succeeded --timeout 180s deployitem/web-di
ready="$(kubectl -n "${ns}" get deployment web-di -o jsonpath='{.status.readyReplicas}')"
[[ "${ready}" == 2 ]] || { echo "the deploy item Succeeded with ${ready:-no} ready replicas, want 2" >&2; exit 1; }
echo "the manifest deploy item Succeeded once both replicas of its Deployment were ready"

# A crash of the node's runtime and kubelet: make up NODE=1 again brings them
# back, and they run new pods.
for c in kubelet containerd; do kill -KILL "$(cat "${LOCAL}/pids/${c}.pid")"; done
"${ROOT}/hack/local-env.sh" up >/dev/null
kubectl wait --for condition=Ready --timeout 120s node/terrace-node
# New pods, started by the kubelet and containerd that came back.
kubectl -n "${ns}" rollout restart deployment/web
kubectl -n "${ns}" rollout status --timeout 120s deployment/web
echo "after a crash of containerd and the kubelet, make up NODE=1 brought the node back: it started new pods"
