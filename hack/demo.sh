#!/usr/bin/env bash
# make demo: on top of the running local environment (make up), applies
# examples/ and shows the objects progressing until every job has finished and
# every claim is bound, then prints the final state.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KUBECONFIG="${ROOT}/.local/kubeconfig"
EX="${ROOT}/examples"
NS=demo
TIMEOUT="${DEMO_TIMEOUT:-180}"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# wait_until DESCRIPTION CMD...: re-runs CMD until it succeeds, showing progress.
wait_until() {
  local what="$1"; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "timed out after ${TIMEOUT}s waiting for ${what}" >&2
      kubectl -n "${NS}" get installations,executions,deployitems,dtc,dt,spacerequests >&2 || true
      exit 1
    fi
    sleep 1
  done
  echo "    ${what}: done"
}

phase_is() { [[ "$(kubectl -n "${NS}" get "$1" -o jsonpath='{.status.phase}')" == "$2" ]]; }
job_finished() {
  local p
  p="$(kubectl -n "${NS}" get "$1" -o jsonpath='{.status.phase}/{.status.jobID}/{.status.jobIDFinished}')"
  IFS=/ read -r phase job finished <<<"${p}"
  [[ -n "${job}" && "${job}" == "${finished}" ]] || return 1
  [[ "${phase}" == Succeeded ]] || { echo "$1 finished ${phase}" >&2; kubectl -n "${NS}" get "$1" -o jsonpath='{.status.lastError.message}' >&2; exit 1; }
}

kubectl get --raw /readyz >/dev/null 2>&1 || { echo "the local environment is not running: make up" >&2; exit 1; }

# `hack/demo.sh clean` (make demo-clean) removes the demo in dependency order:
# every root installation in the namespace first - the demo's and any the user
# added while trying things out - (their deployers need the Targets and Secrets
# to uninstall; sub-installations go with their roots), then the claim (its
# target, SpaceRequest and namespace follow), then the namespace. Deleting the
# namespace first would delete the Targets under the installations and leave
# them DeleteFailed.
if [[ "${1:-}" == clean ]]; then
  step "removing the demo"
  roots="$(kubectl -n "${NS}" get installations -l '!landscaper.gardener.cloud/encompassed-by' -o name 2>/dev/null || true)"
  if [[ -n "${roots}" ]]; then
    # shellcheck disable=SC2086 # one argument per installation
    if ! kubectl -n "${NS}" delete ${roots} --ignore-not-found --timeout="${TIMEOUT}s"; then
      echo "some installations in ${NS} did not finish deleting:" >&2
      kubectl -n "${NS}" get installations >&2 || true
      echo "an installation that ended DeleteFailed says why in status.lastError; if its deployer cannot uninstall (say its Target is gone)," >&2
      echo "annotate its deploy items with landscaper.gardener.cloud/delete-without-uninstall=true and the root installation with landscaper.gardener.cloud/operation=reconcile" >&2
      exit 1
    fi
  fi
  kubectl -n "${NS}" delete dtc team-env --ignore-not-found --timeout="${TIMEOUT}s"
  kubectl delete namespace "${NS}" landscape-app greeter greeter-cv --ignore-not-found --timeout="${TIMEOUT}s"
  # Cluster-scoped: it would make whoever creates the ServiceAccount
  # demo/demo-target again cluster-admin.
  kubectl delete clusterrolebinding terrace-demo-target --ignore-not-found
  exit 0
fi

if [[ "$(kubectl get namespace "${NS}" -o jsonpath='{.status.phase}' 2>/dev/null)" == Terminating ]]; then
  step "waiting for the previous demo namespace to finish deleting"
  kubectl wait --for=delete "namespace/${NS}" --timeout="${TIMEOUT}s"
fi

step "namespace ${NS}, the seeds' DeploymentTargetClass"
kubectl apply -f "${EX}/landscape/namespace.yaml" -f "${EX}/seeds/004-step0-deploymenttargetclass.yaml"

step "the cluster Target for the landscape (a ServiceAccount token of this local cluster)"
# Local environment only: the demo target may do anything, like an admin kubeconfig would.
kubectl -n "${NS}" create serviceaccount demo-target --dry-run=client -o yaml | kubectl apply -f -
kubectl create clusterrolebinding terrace-demo-target --clusterrole cluster-admin \
  --serviceaccount "${NS}:demo-target" --dry-run=client -o yaml | kubectl apply -f -
token="$(kubectl -n "${NS}" create token demo-target --duration 24h)"
server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
ca="$(base64 -w0 <"${ROOT}/.local/pki/ca.crt")"
kubeconfig="$(printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster: {server: "%s", certificate-authority-data: "%s"}\nusers:\n- name: demo\n  user: {token: "%s"}\ncontexts:\n- name: local\n  context: {cluster: local, user: demo}\ncurrent-context: local\n' "${server}" "${ca}" "${token}")"
kubectl -n "${NS}" create secret generic local-cluster-kubeconfig --from-literal=kubeconfig="${kubeconfig}" \
  --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f "${EX}/landscape/target.yaml"

step "the landscape: root installation → sub-installations database, app → executions → deploy items"
kubectl apply -f "${EX}/landscape/installation.yaml"

step "a Helm chart: examples/helm-chart/chart pushed to the local registry, then deployed by the helm deployer"
registry="$(cat "${ROOT}/.local/registry/address")"
"${ROOT}/bin/terrace" chart push --plain-http "${EX}/helm-chart/chart" "${registry}/demo/charts/greeter"
cat <<YAML | kubectl apply -f -
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DataObject
metadata: {name: chart-registry, namespace: ${NS}}
data: ${registry}/demo
YAML
kubectl apply -f "${EX}/helm-chart/installation.yaml"

step "a landscape as an OCM component version: blueprint and chart pushed with terrace component push"
"${ROOT}/bin/terrace" component push --plain-http --repo "${registry}/ocm" "${EX}/component-landscape/component-constructor.yaml"
cat <<YAML | kubectl apply -f -
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Context
metadata: {name: components, namespace: ${NS}}
repositoryContext:
  type: OCIRegistry
  baseUrl: ${registry}/ocm
YAML
kubectl apply -f "${EX}/component-landscape/installation.yaml"

step "a DeploymentTargetClaim, provisioned through a SpaceRequest"
kubectl apply -f "${EX}/provisioned-namespace/claim.yaml"

step "waiting"
wait_until "landscape job finished" job_finished installation/landscape
wait_until "greeter job finished" job_finished installation/greeter
wait_until "greeter-landscape job finished" job_finished installation/greeter-landscape
wait_until "claim team-env Bound" phase_is dtc/team-env Bound

step "deploying into the provisioned namespace"
dt="$(kubectl -n "${NS}" get dt -o jsonpath='{range .items[?(@.spec.claimRef.name=="team-env")]}{.metadata.name}{end}')"
secret="$(kubectl -n "${NS}" get dt "${dt}" -o jsonpath='{.spec.kubernetesCredentials.clusterCredentialsSecret}')"
env_ns="$(kubectl -n "${NS}" get dt "${dt}" -o jsonpath='{.spec.kubernetesCredentials.defaultNamespace}')"
cat <<YAML | kubectl apply -f -
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Target
metadata: {name: team-env, namespace: ${NS}}
spec:
  type: landscaper.gardener.cloud/kubernetes-cluster
  secretRef: {name: ${secret}, key: kubeconfig}
---
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DataObject
metadata: {name: team-env-namespace, namespace: ${NS}}
data: ${env_ns}
YAML
kubectl apply -f "${EX}/provisioned-namespace/installation.yaml"
wait_until "team-app job finished" job_finished installation/team-app

step "final state"
kubectl -n "${NS}" get installations,executions,deployitems
kubectl -n "${NS}" get dtc,dt,spacerequests
kubectl -n "${NS}" get dataobject landscape-app-url -o jsonpath='{"landscape exports app-url = "}{.data}{"\n"}'
kubectl -n greeter get configmap greeter-greeting -o jsonpath='{"greeter/greeter-greeting greeting = "}{.data.greeting}{"\n"}'
kubectl -n "${NS}" get dataobject greeter-landscape-greeting greeter-landscape-chart-version greeter-landscape-image \
  -o jsonpath='{range .items[*]}{"greeter-landscape exports "}{.metadata.name}{" = "}{.data}{"\n"}{end}'
helm_release="$(kubectl -n greeter get secrets -l owner=helm,name=greeter -o jsonpath='{range .items[*]}{.metadata.labels.name} revision {.metadata.labels.version} {.metadata.labels.status}{"\n"}{end}')"
echo "helm release ${helm_release}"
kubectl -n landscape-app get configmap app-config -o jsonpath='{"landscape-app/app-config DATABASE_URL = "}{.data.DATABASE_URL}{"\n"}'
kubectl -n "${env_ns}" get configmap team-app -o jsonpath='{"provisioned namespace "}{.metadata.namespace}{": team-app greeting = "}{.data.greeting}{"\n"}'
