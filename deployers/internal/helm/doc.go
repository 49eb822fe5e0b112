// Package helm is the helm deployer (deploy items of type
// landscaper.gardener.cloud/helm): it deploys a Helm chart as a Helm
// release on the cluster of the item's Target (type
// landscaper.gardener.cloud/kubernetes-cluster), with the Helm v3 SDK.
//
// # Provider configuration
//
//	apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
//	kind: ProviderConfiguration
//	chart:
//	  ref: registry.example/charts/app:1.0.0   # OCI reference, or
//	  # archive: {raw: <base64 .tgz>}, helmChartRepo, resourceRef, fromResource
//	name: app                                  # release name
//	namespace: apps                            # release namespace
//	createNamespace: true
//	values: {replicas: 2}
//	helmDeploymentConfig:                      # Helm's options per operation
//	  install: {atomic: true, timeout: 5m}     # atomic, force, wait, timeout, takeOwnership, skipSchemaValidation
//	  upgrade: {atomic: true}
//	  uninstall: {timeout: 5m}                 # wait, timeout
//	exports:
//	  exports:
//	  - key: replicas
//	    jsonPath: .Values.replicas             # read from the values
//	  - key: address
//	    jsonPath: .spec.clusterIP              # read from a deployed object
//	    fromResource: {apiVersion: v1, kind: Service, name: app, namespace: apps}
//	readinessChecks:                           # as the manifest deployer's; operators also !, =, notin
//	  timeout: 5m
//	  custom: [{name: up, resourceSelector: [...], requirements: [{jsonPath: .status.phase, operator: "=", values: ["Up"]}]}]
//	helmDeployment: false                      # render and apply the objects, no Helm release
//	deletionGroups: [...]                      # helmDeployment: false only, as the manifest deployer's
//	deletionGroupsDuringUpdate: [...]
//	continuousReconcile: {every: 1h}           # or {cron: "0 */6 * * *"}; at least --min-continuous-reconcile-interval
//
// Chart sources: chart.ref (an OCI registry; registryPullSecrets of the
// item's Context give credentials), chart.archive.raw (inline),
// chart.archive.remote.url and chart.helmChartRepo (a classic repository's
// index.yaml; helmChartRepoCredentials of the Context give credentials).
// Plain HTTP and loopback addresses only with --allow-loopback-registries;
// every download is bounded by --max-chart-bytes and
// --registry-request-timeout. Archives are cached by digest, in memory
// (--chart-cache-bytes) and optionally on disk (--chart-cache-dir).
// chart.resourceRef (a resource key, as getResourceKey writes it) and
// chart.fromResource ({ref: {repositoryContext, componentName, version} |
// inline: <descriptor>, resourceName}) take the chart from a resource of an
// OCM component version, read with the item's registryPullSecrets within
// the same bounds: a local blob of a chart media type (cached by its
// digest), an ociArtifact (pulled as chart.ref) or a helmChartRepository
// access (read as chart.helmChartRepo).
//
// With helmDeployment: false the chart is rendered as helm template does
// (capabilities: the target's Kubernetes version and API versions; CRDs of
// crds/ included, hooks not run) and its objects are applied by the
// manifest deployer's machinery (manifest.Applier): server-side apply,
// ownership marks, deletion of objects that leave the chart (in the order
// of deletionGroupsDuringUpdate), readiness, exports, deletion on the
// item's deletion (deletionGroups). status.providerStatus.managedResources
// lists the applied objects. In both modes readiness checks and exports
// from objects are the manifest deployer's, on the release's or the
// rendered objects.
//
// Reconcile installs the release, or upgrades it when its chart or values
// changed (an unchanged release is left alone, except by the scheduled
// reconciles of continuousReconcile, which upgrade it to put back what
// drifted); release records are Secrets
// in the release namespace, at most --max-release-history revisions.
// status.providerStatus lists the release's objects. Deleting the item
// uninstalls the release, unless the item carries
// landscaper.gardener.cloud/delete-without-uninstall: "true".
//
// Invariants:
//   - status.providerStatus is set before Helm writes to the target, so
//     deleting the item uninstalls whatever a failed install left.
//   - Charts come only from the item's configuration, with no credentials
//     of the deployer's own.
package helm
