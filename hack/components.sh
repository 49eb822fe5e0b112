# Sourced by the hack/ scripts: every Terrace binary, in one place.
# Each entry: binary, its Go module directory, and the packages (relative to the
# module, ';'-separated) whose +kubebuilder:rbac markers make up its ClusterRole.
# (The Makefile keeps its own BINARIES list, for its per-binary targets.)
# shellcheck disable=SC2034 # used by the scripts that source this file
TERRACE_COMPONENTS=(
  "installation-controller installation-controller ./..."
  "execution-controller execution-controller ./..."
  "manifest-deployer deployers ./lib/...;./internal/manifest/...;./cmd/manifest-deployer/..."
  "mock-deployer deployers ./lib/...;./internal/mock/...;./cmd/mock-deployer/..."
  "helm-deployer deployers ./lib/...;./internal/helm/...;./cmd/helm-deployer/..."
  "dt-binder dt-binder ./..."
  "sandbox-provisioner sandbox-provisioner ./..."
  "spacerequest-stub spacerequest-stub ./..."
)

# TERRACE_BINARIES: the binaries' names alone, in the same order.
TERRACE_BINARIES=()
for _component in "${TERRACE_COMPONENTS[@]}"; do
  TERRACE_BINARIES+=("${_component%% *}")
done
unset _component
