# Terrace — build, test and verify every module of the Go workspace.
# `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN := $(ROOT)/bin
TOOLS_BIN := $(BIN)/tools
K8S_BIN := $(BIN)/k8s

# Every module of the workspace, in dependency order.
MODULES := apis kit deployers execution-controller installation-controller dt-binder sandbox-provisioner spacerequest-stub cli bench e2e

# Binary name -> package directory.
BINARIES := installation-controller execution-controller manifest-deployer mock-deployer helm-deployer dt-binder sandbox-provisioner spacerequest-stub
PKG_installation-controller := ./installation-controller
PKG_execution-controller := ./execution-controller
PKG_manifest-deployer := ./deployers/cmd/manifest-deployer
PKG_mock-deployer := ./deployers/cmd/mock-deployer
PKG_helm-deployer := ./deployers/cmd/helm-deployer
PKG_dt-binder := ./dt-binder
PKG_sandbox-provisioner := ./sandbox-provisioner
PKG_spacerequest-stub := ./spacerequest-stub

# Command-line tools: built by make build like the binaries, without a container image.
CLI_BINARIES := terrace
PKG_terrace := ./cli/cmd/terrace

# Pinned tool versions. Bumping one reinstalls it (the version is part of the path).
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Modules that only pin and build tools from the Go module proxy (not part of the workspace).
TOOL_MODULES := hack/tools/kube hack/tools/etcd hack/tools/registry hack/tools/node hack/tools/containerd hack/tools/cni hack/tools/coredns hack/tools/images

# NODE=1: make up adds a real node that runs pods (needs root; hack/node-env.sh).
NODE ?=

# Tests: envtest finds the control plane this project builds (hack/build-control-plane.sh).
TEST_FLAGS ?= -count=1 -timeout=20m
export KUBEBUILDER_ASSETS := $(K8S_BIN)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-24s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: generate-apis generate-rbac generate-manifests ## Generate all code (deepcopy, CRDs, RBAC, kustomize directories).

.PHONY: generate-apis
generate-apis: $(CONTROLLER_GEN) ## Generate deepcopy functions and CRD YAML for apis/.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/generate-apis.sh apis

.PHONY: generate-rbac
generate-rbac: $(CONTROLLER_GEN) ## Generate each binary's ClusterRole (config/rbac/<binary>/role.yaml) from its +kubebuilder:rbac markers.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/generate-rbac.sh config/rbac

.PHONY: generate-manifests
generate-manifests: generate-rbac ## Generate config/components/<binary>/ and config/default (kustomize) for every binary.
	hack/generate-manifests.sh config/components

.PHONY: fmt
fmt: ## Format all Go code.
	gofmt -w $(MODULES) hack

.PHONY: tidy
tidy: ## Run go mod tidy in every module.
	@for m in $(MODULES) $(TOOL_MODULES); do (cd $$m && GOWORK=off go mod tidy); done

##@ Verification

.PHONY: verify
verify: verify-fmt verify-vet verify-lint verify-generate verify-tidy verify-gowork-off verify-dockerfile verify-module-boundaries ## Run every check CI runs besides tests.

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-ed.
	@out="$$(gofmt -l $(MODULES) hack)"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## Run go vet in every module.
	@for m in $(MODULES); do echo "go vet: $$m"; (cd $$m && go vet ./...); done

.PHONY: verify-lint
verify-lint: $(GOLANGCI_LINT) ## Run golangci-lint in every module.
	@for m in $(MODULES); do echo "golangci-lint: $$m"; (cd $$m && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yaml ./...); done

.PHONY: verify-generate
verify-generate: $(CONTROLLER_GEN) ## Fail if generated code differs from the sources (generates into a copy; the tree is not touched).
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; cp -r apis "$$tmp/apis"; \
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/generate-apis.sh "$$tmp/apis" >/dev/null; \
	diff -ru apis "$$tmp/apis" || { echo "generated code is out of date: run 'make generate'"; exit 1; }; \
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/generate-rbac.sh "$$tmp/rbac"; \
	diff -ru config/rbac "$$tmp/rbac" || { echo "generated RBAC is out of date: run 'make generate'"; exit 1; }; \
	mkdir -p "$$tmp/config/rbac"; cp -r config/rbac/. "$$tmp/config/rbac/"; \
	hack/generate-manifests.sh "$$tmp/config/components"; \
	diff -ru config/components "$$tmp/config/components" && diff -ru config/default "$$tmp/config/default" || { echo "generated manifests are out of date: run 'make generate'"; exit 1; }

.PHONY: verify-tidy
verify-tidy: ## Fail if go.mod/go.sum of any module is not tidy (the tree is not touched).
	@for m in $(MODULES) $(TOOL_MODULES); do (cd $$m && GOWORK=off go mod tidy -diff) || { echo "$$m: go.mod/go.sum not tidy: run 'make tidy'"; exit 1; }; done

.PHONY: verify-dockerfile
verify-dockerfile: ## Fail if the Dockerfile's dependency stage misses a module some binary's go.mod replaces (no Docker needed).
	@hack/verify-dockerfile.sh

.PHONY: verify-module-boundaries
verify-module-boundaries: ## Fail if a binary's module requires another binary's module (they share only apis and kit).
	@hack/verify-module-boundaries.sh

.PHONY: verify-gowork-off
verify-gowork-off: ## Build every module with GOWORK=off (as image builds do).
	@for m in $(MODULES); do echo "GOWORK=off go build: $$m"; (cd $$m && GOWORK=off go build ./...); done

##@ Build

.PHONY: build
build: $(addprefix build-,$(BINARIES) $(CLI_BINARIES)) ## Build every controller binary and the terrace CLI into bin/.

.PHONY: $(addprefix build-,$(BINARIES) $(CLI_BINARIES))
$(addprefix build-,$(BINARIES) $(CLI_BINARIES)): build-%:
	go build -o $(BIN)/$* $(PKG_$*)

.PHONY: build-control-plane
build-control-plane: ## Build etcd, kube-apiserver and kube-controller-manager into bin/k8s, and the OCI registry into bin/registry (cached).
	hack/build-control-plane.sh

.PHONY: build-node
build-node: ## Build the local node (kubelet, kube-proxy, kube-scheduler, containerd, CNI plugins, CoreDNS, image builder) into bin/node (cached).
	hack/build-node.sh

.PHONY: build-registry
build-registry: ## Build only the OCI distribution registry of the local environment into bin/registry (cached).
	hack/build-registry.sh

##@ Local environment

.PHONY: up
up: build-control-plane build $(if $(filter 1,$(NODE)),build-node) ## Start the local environment: control plane, OCI registry, every controller as its own process (.local/); NODE=1 adds a node that runs pods (root).
	TERRACE_NODE=$(NODE) hack/local-env.sh up

.PHONY: demo
demo: up ## On top of make up: apply examples/ and follow them until every job finished and every claim is bound.
	hack/demo.sh

.PHONY: demo-clean
demo-clean: ## Remove what make demo created, in dependency order (installations, claim, namespaces).
	hack/demo.sh clean

.PHONY: down
down: ## Stop exactly what `make up` started.
	hack/local-env.sh down

.PHONY: images
images: ## Build one image per binary (no Docker) and push it to the local registry of make up as terrace/<binary>:$(IMAGE_TAG); IMAGES="a b" builds only those.
	TERRACE_IMAGE_TAG=$(IMAGE_TAG) TERRACE_IMAGES="$(IMAGES)" hack/local-env.sh images

.PHONY: deploy-local
deploy-local: ## Run every component from the images of make images as Deployments on the local node (make up NODE=1, root), in place of the processes.
	hack/local-env.sh deploy-local

.PHONY: undeploy-local
undeploy-local: ## Remove the Deployments of make deploy-local and run the controllers as processes again.
	hack/local-env.sh undeploy-local

.PHONY: status-local
status-local: ## Show the processes of the local environment.
	hack/local-env.sh status

.PHONY: clean-local
clean-local: ## Stop the local environment and remove its state (.local/).
	hack/local-env.sh clean

##@ Images and clusters (need Docker; kind for the kind-* targets)

# Registry-qualified by default, so a cluster never pulls a stranger's
# image of the same name from Docker Hub; set it to your registry to push.
IMAGE_REPO ?= localhost/terrace
IMAGE_TAG ?= dev
KIND_CLUSTER ?= terrace
# The kind node image (empty: the kind release's default); Terrace needs Kubernetes 1.31 or newer.
KIND_NODE_IMAGE ?=
MODULE_installation-controller := installation-controller
MODULE_execution-controller := execution-controller
MODULE_manifest-deployer := deployers
MODULE_mock-deployer := deployers
MODULE_helm-deployer := deployers
MODULE_dt-binder := dt-binder
MODULE_sandbox-provisioner := sandbox-provisioner
MODULE_spacerequest-stub := spacerequest-stub
PKGREL_manifest-deployer := ./cmd/manifest-deployer
PKGREL_mock-deployer := ./cmd/mock-deployer
PKGREL_helm-deployer := ./cmd/helm-deployer

.PHONY: docker-build
docker-build: $(addprefix docker-build-,$(BINARIES)) ## Build every component's image.

.PHONY: $(addprefix docker-build-,$(BINARIES))
$(addprefix docker-build-,$(BINARIES)): docker-build-%:
	docker build --build-arg MODULE=$(MODULE_$*) --build-arg PACKAGE=$(or $(PKGREL_$*),.) --build-arg VERSION=$(IMAGE_TAG) -t $(IMAGE_REPO)/$*:$(IMAGE_TAG) .

.PHONY: docker-push
docker-push: ## Push every component's image ($(IMAGE_REPO)/<binary>:$(IMAGE_TAG)).
	for b in $(BINARIES); do docker push $(IMAGE_REPO)/$$b:$(IMAGE_TAG); done

# The kustomization deploy and kind-up apply: config/default with every image
# set to $(IMAGE_REPO)/<binary>:$(IMAGE_TAG).
DEPLOY_DIR := $(ROOT)/.local/deploy

.PHONY: deploy-manifests
deploy-manifests: ## Write .local/deploy/: config/default with the images of IMAGE_REPO and IMAGE_TAG (`kubectl kustomize .local/deploy` shows it).
	@hack/deploy-overlay.sh $(DEPLOY_DIR) $(IMAGE_REPO) $(IMAGE_TAG)

.PHONY: deploy
deploy: deploy-manifests ## Deploy CRDs and every component (images IMAGE_REPO/<binary>:IMAGE_TAG) to the cluster of the current kubeconfig context.
	kubectl apply --server-side -k $(DEPLOY_DIR)

.PHONY: undeploy
undeploy: deploy-manifests ## Remove every component and the CRDs from the current cluster.
	kubectl delete --ignore-not-found -k $(DEPLOY_DIR)

.PHONY: kind-up
kind-up: docker-build ## Create a kind cluster, load every image, deploy Terrace into it.
	kind get clusters | grep -qx $(KIND_CLUSTER) || kind create cluster --name $(KIND_CLUSTER) $(if $(KIND_NODE_IMAGE),--image $(KIND_NODE_IMAGE))
	for b in $(BINARIES); do kind load docker-image --name $(KIND_CLUSTER) $(IMAGE_REPO)/$$b:$(IMAGE_TAG); done
	hack/deploy-overlay.sh $(DEPLOY_DIR) $(IMAGE_REPO) $(IMAGE_TAG)
	kubectl --context kind-$(KIND_CLUSTER) apply --server-side -k $(DEPLOY_DIR)
	kubectl --context kind-$(KIND_CLUSTER) -n terrace-system wait --for condition=Available --timeout 180s deployment --all

.PHONY: e2e-kind
e2e-kind: kind-up ## Run the e2e suite (e2e/suite) against Terrace deployed in the kind cluster.
	mkdir -p $(ROOT)/.local
	kind get kubeconfig --name $(KIND_CLUSTER) >$(ROOT)/.local/kind-kubeconfig
	cd e2e && E2E_KUBECONFIG=$(ROOT)/.local/kind-kubeconfig go test $(TEST_FLAGS) ./suite/ -ginkgo.v

.PHONY: kind-down
kind-down: ## Delete the kind cluster.
	kind delete cluster --name $(KIND_CLUSTER)

##@ Test

.PHONY: test
test: build-control-plane build ## Run every module's tests against a real kube-apiserver and etcd (e2e runs the built binaries).
	@for m in $(MODULES); do echo "go test: $$m"; (cd $$m && go test $(TEST_FLAGS) ./...); done
	@echo "go test: hack/tools/images"; cd hack/tools/images && GOWORK=off go test $(TEST_FLAGS) ./...

.PHONY: e2e
e2e: build-control-plane build ## Run only the e2e suite (e2e/suite): its own local environment (.local/e2e), every binary a process. `make test` runs it too.
	cd e2e && go test $(TEST_FLAGS) ./suite/ -ginkgo.v

.PHONY: e2e-node
e2e-node: build-control-plane build build-node ## Run the e2e suite against Terrace as pods on a real node (root): its own make up NODE=1, make images, make deploy-local in .local/e2e-node.
	TEST_FLAGS="$(TEST_FLAGS)" hack/e2e-node.sh

.PHONY: test-local-env
test-local-env: build-control-plane build ## Smoke-test the local environment (make up, manifests dry-run, a claim end to end, OCI push/pull, make demo, crash recovery, make down).
	hack/local-env-smoke.sh

.PHONY: test-node
test-node: build-control-plane build build-node ## Smoke-test the local node as root (make up NODE=1, a Deployment behind a Service reached by DNS from another pod, a manifest deploy item, a crash, make down leaves nothing).
	hack/node-smoke.sh

##@ Performance

BENCH_FLAGS ?=

.PHONY: bench
bench: build-control-plane build ## Benchmark whole jobs across every binary in a fresh local environment of its own (.local/bench-env, own ports); JSON in .local/bench/. Options: BENCH_FLAGS="-workloads roots -n roots=200 -keep".
	go run ./bench/cmd/terrace-bench $(BENCH_FLAGS)

##@ Tools

.PHONY: tools
tools: $(CONTROLLER_GEN) $(GOLANGCI_LINT) ## Install the pinned controller-gen and golangci-lint into bin/tools (make generate and make verify do it when needed).

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOWORK=off go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_BIN)/controller-gen $@

$(GOLANGCI_LINT):
	mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOWORK=off go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_BIN)/golangci-lint $@
