#!/usr/bin/env bash
# Smoke test of the local environment (make test-local-env, run by CI): start it,
# check that every component's kustomize manifests pass a server-side dry run,
# push and pull a chart-shaped OCI artifact and an image through the local
# registry with a standard client (oras-go),
# drive the seed-004 claim through dynamic provisioning with every controller
# running as its own process under its own generated RBAC, delete it again, run
# the demo (make demo: a landscape of installations and a claim), and stop. Any missing permission or broken hand-over shows up here as a timeout,
# with the controllers' logs printed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KUBECONFIG="${ROOT}/.local/kubeconfig"
SEEDS="${ROOT}/examples/seeds"
ns="smoke-$$"
tools="$(mktemp -d)"

cleanup() {
  status=$?
  if ((status != 0)); then
    echo "smoke test failed; controller logs:" >&2
    for f in "${ROOT}"/.local/logs/*.log; do echo "--- ${f}" >&2; tail -n 30 "${f}" >&2; done
  fi
  # Delete what the test created while the controllers still run: their
  # finalizers need them to finish, and a namespace left terminating would
  # trouble the next `make up`.
  "${ROOT}/hack/demo.sh" clean >/dev/null 2>&1 || true
  kubectl delete namespace "${ns}" --ignore-not-found --timeout=120s >/dev/null 2>&1 || true
  "${ROOT}/hack/local-env.sh" down >/dev/null
  rm -rf "${tools}"
  exit "${status}"
}
trap cleanup EXIT

"${ROOT}/hack/local-env.sh" up

# The OCI registry: what a standard client (oras-go, the library Helm's
# registry client is built on) pushes comes back by digest, a chart-shaped
# artifact and an image alike. No helm or oras CLI is built here; the
# project's own oci-roundtrip stands in for them.
(cd "${ROOT}/kit" && go build -o "${tools}/oci-roundtrip" ./registrytest/cmd/oci-roundtrip)
registry="$(cat "${ROOT}/.local/registry/address")"
pushed="$("${tools}/oci-roundtrip" -registry "${registry}")"
chart_ref="$(awk '$1 == "chart" { print $2 }' <<<"${pushed}")"
image_ref="$(awk '$1 == "image" { print $2 }' <<<"${pushed}")"
[[ -n "${chart_ref}" && -n "${image_ref}" ]] || { echo "oci-roundtrip printed no references: ${pushed}" >&2; exit 1; }
# Matched in bash: `| grep -q` would stop reading at the first match and,
# under pipefail, fail the pipeline by the status command's SIGPIPE.
[[ "$("${ROOT}/hack/local-env.sh" status)" =~ (^|$'\n')registry\ +[0-9]+\ +running\ on\ http://${registry}\  ]] ||
  { echo "make status-local does not show the registry running on ${registry}" >&2; exit 1; }
echo "the OCI registry on ${registry} served a pushed chart and image back by digest"

# The deployable manifests (CRDs, namespace, every component) are accepted by a real API server.
kubectl kustomize "${ROOT}/config/default" | kubectl apply --server-side --dry-run=server -f - >/dev/null
for c in "${ROOT}"/config/components/*/; do
  kubectl kustomize "${c}" >/dev/null
done
echo "kustomize manifests pass a server-side dry run"

# make deploy's overlay sets every component's image to IMAGE_REPO/<binary>:IMAGE_TAG.
overlay="$(mktemp -d)"
"${ROOT}/hack/deploy-overlay.sh" "${overlay}" example.org/me v1.2.3 >/dev/null
images="$(kubectl kustomize "${overlay}" | sed -n 's/^ *image: //p' | sort -u)"
rm -rf "${overlay}"
want="$(for c in "${ROOT}"/config/components/*/; do echo "example.org/me/$(basename "${c}"):v1.2.3"; done | sort -u)"
[[ "${images}" == "${want}" ]] || { printf 'deploy overlay images:\n%s\nwant:\n%s\n' "${images}" "${want}" >&2; exit 1; }
echo "make deploy's overlay sets every image to IMAGE_REPO/<binary>:IMAGE_TAG"

kubectl create namespace "${ns}"
kubectl apply -f "${SEEDS}/004-step0-deploymenttargetclass.yaml"
kubectl -n "${ns}" apply -f "${SEEDS}/004-step1-deploymenttargetclaim.yaml" -f "${SEEDS}/004-step2-environment.yaml"
kubectl -n "${ns}" wait --for=jsonpath='{.status.phase}'=Bound dtc/staging-dtc --timeout=120s
kubectl -n "${ns}" wait --for=jsonpath='{.status.phase}'=Bound dt --all --timeout=60s
kubectl -n "${ns}" wait --for=condition=Ready spacerequest --all --timeout=60s
kubectl -n "${ns}" get dtc,dt,spacerequests
target_ns="$(kubectl -n "${ns}" get dt -o jsonpath='{.items[0].spec.kubernetesCredentials.defaultNamespace}')"
kubectl get namespace "${target_ns}"

# reclaimPolicy Delete: the target, the SpaceRequest and the namespace go with the claim.
kubectl -n "${ns}" delete dtc staging-dtc --timeout=120s
kubectl -n "${ns}" wait --for=delete dt --all --timeout=60s
kubectl wait --for=delete "namespace/${target_ns}" --timeout=120s

"${ROOT}/hack/demo.sh"

# A crash: the API server, the registry and a controller die without
# warning; `make up` starts exactly what is missing and everything is healthy
# again, the registry with what was pushed to it before.
pids="${ROOT}/.local/pids"
kill -KILL "$(cat "${pids}/kube-apiserver.pid")" "$(cat "${pids}/registry.pid")" "$(cat "${pids}/dt-binder.pid")"
"${ROOT}/hack/local-env.sh" up >/dev/null
"${ROOT}/hack/local-env.sh" status
kubectl get --raw /readyz >/dev/null
"${tools}/oci-roundtrip" -pull-chart "${chart_ref}" -pull-image "${image_ref}" >/dev/null
echo "make up recovered from killed processes; the registry kept what was pushed"

# A controller's port taken by another program that answers its readiness
# check (kubectl proxy passes /readyz on to kube-apiserver): `make up` fails,
# naming the port and the controller, instead of reporting it running; once
# the port is free, `make up` starts it.
kill -TERM "$(cat "${pids}/dt-binder.pid")"
health="$(cut -d' ' -f2 "${pids}/dt-binder.ports")"
for _ in $(seq 1 100); do curl -s "http://127.0.0.1:${health}/readyz" >/dev/null || break; sleep 0.1; done
kubectl proxy --port "${health}" >/dev/null 2>&1 &
proxy=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:${health}/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:${health}/readyz" >/dev/null || { echo "kubectl proxy did not answer on port ${health}" >&2; exit 1; }
if out="$("${ROOT}/hack/local-env.sh" up 2>&1)"; then
  echo "make up reported success while dt-binder's port ${health} was taken:" >&2; echo "${out}" >&2; exit 1
fi
[[ "${out}" == *"port ${health}, where dt-binder listens, is taken"* ]] ||
  { echo "make up failed without naming dt-binder's taken port:" >&2; echo "${out}" >&2; exit 1; }
kill "${proxy}"; wait "${proxy}" 2>/dev/null || true
"${ROOT}/hack/local-env.sh" up >/dev/null
echo "make up refused a taken port, and started dt-binder once it was free"

# `make up` itself (it runs `go build -o` for every binary, which writes each
# file anew) restarts nothing when no code changed.
declare -A started
for f in "${pids}"/*.pid; do started["$(basename "${f}" .pid)"]="$(cat "${f}")"; done
make -C "${ROOT}" up >/dev/null
for name in "${!started[@]}"; do
  [[ "$(cat "${pids}/${name}.pid")" == "${started[${name}]}" ]] ||
    { echo "make up restarted ${name}, whose binary did not change" >&2; exit 1; }
done
echo "make up with nothing changed kept all ${#started[@]} processes"

# A changed binary: `make up` restarts the process that runs the old one,
# and only that one. (A byte appended to an ELF file changes its content, not
# what it runs. A running binary cannot be written to: the changed copy is
# moved into place, as go build does, and the original moved back after.)
before="$(cat "${pids}/mock-deployer.pid")" other="$(cat "${pids}/dt-binder.pid")"
cp "${ROOT}/bin/mock-deployer" "${ROOT}/bin/mock-deployer.smoke"
cp "${ROOT}/bin/mock-deployer" "${ROOT}/bin/mock-deployer.changed"
printf '\0' >>"${ROOT}/bin/mock-deployer.changed"
mv "${ROOT}/bin/mock-deployer.changed" "${ROOT}/bin/mock-deployer"
"${ROOT}/hack/local-env.sh" up >/dev/null
mv "${ROOT}/bin/mock-deployer.smoke" "${ROOT}/bin/mock-deployer"
after="$(cat "${pids}/mock-deployer.pid")"
[[ "${after}" != "${before}" ]] || { echo "make up kept mock-deployer (pid ${before}) running its old binary" >&2; exit 1; }
[[ "$(cat "${pids}/dt-binder.pid")" == "${other}" ]] || { echo "make up restarted dt-binder, whose binary did not change" >&2; exit 1; }
echo "make up restarted the controller whose binary changed"

# `make down` leaves no process behind.
recorded=()
for f in "${pids}"/*.pid; do recorded+=("$(cat "${f}")"); done
"${ROOT}/hack/demo.sh" clean >/dev/null
if kubectl get clusterrolebinding terrace-demo-target >/dev/null 2>&1; then
  echo "make demo-clean left the ClusterRoleBinding terrace-demo-target (cluster-admin)" >&2; exit 1
fi
"${ROOT}/hack/local-env.sh" down >/dev/null
for pid in "${recorded[@]}"; do
  if [[ -e "/proc/${pid}" ]] && [[ "$(awk '{ print $3 }' "/proc/${pid}/stat")" != Z ]]; then
    echo "process ${pid} ($(tr '\0' ' ' <"/proc/${pid}/cmdline")) still runs after make down" >&2
    exit 1
  fi
done
[[ -z "$(ls -A "${pids}"/*.pid 2>/dev/null)" ]] || { echo "PID files left after make down" >&2; exit 1; }
echo "make down stopped all ${#recorded[@]} processes"
echo "local environment smoke test passed"
