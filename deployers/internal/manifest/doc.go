// Package manifest is the manifest deployer (deploy items of type
// landscaper.gardener.cloud/kubernetes-manifest): it applies Kubernetes
// objects to the cluster of the item's Target (type
// landscaper.gardener.cloud/kubernetes-cluster, kubeconfig inline in
// spec.config.kubeconfig or in a Secret named by spec.secretRef, key
// "kubeconfig" by default).
//
// # Provider configuration
//
// v1alpha1 (the seed's form) applies every manifest with policy manage:
//
//	apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha1
//	kind: ProviderConfiguration
//	manifests:
//	- apiVersion: v1
//	  kind: Namespace
//	  metadata: {name: foo}
//
// v1alpha2 adds a policy per manifest, readiness checks, exports and
// periodic re-apply:
//
//	apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
//	kind: ProviderConfiguration
//	updateStrategy: update            # update (server-side apply, default) | patch (merge patch)
//	manifests:
//	- policy: manage                  # manage | fallback | keep | ignore | immutable
//	  manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: foo}}
//	readinessChecks:
//	  disableDefault: false           # default: Deployments, StatefulSets, DaemonSets, Jobs, Pods must be ready
//	  timeout: 5m                     # default: the item's spec.timeout
//	  custom:
//	  - name: cm-ready
//	    resourceSelector: [{apiVersion: v1, kind: ConfigMap, name: a, namespace: foo}]
//	    requirements: [{jsonPath: .data.state, operator: "==", values: ["ready"]}]
//	  - name: by-labels               # every object of the kind with the labels (waits while none)
//	    labelSelector: {apiVersion: v1, kind: ConfigMap, matchLabels: {tier: x}}
//	    requirements: [{jsonPath: .data.state, operator: exists}]
//	exports:
//	  exports:
//	  - key: state
//	    jsonPath: .data.state
//	    fromResource: {apiVersion: v1, kind: ConfigMap, name: a, namespace: foo}
//	  - key: password                 # through a reference {name, namespace} at jsonPath
//	    jsonPath: .spec.credentialsRef
//	    fromResource: {apiVersion: example.com/v1, kind: Database, name: db, namespace: foo}
//	    fromObjectRef: {apiVersion: v1, kind: Secret, jsonPath: .data.password}
//	continuousReconcile:
//	  every: 5m                       # re-apply a Succeeded item this often (drift correction)
//	  # or cron: "0 */6 * * *"        # on a five-field crontab schedule, UTC
//	deletionGroups:                   # order of deletion on the item's deletion (default below)
//	- customResourceGroup:            # apiVersion + kind (or resource name), optional names, namespaces
//	    resources: [{apiVersion: v1, kind: ConfigMap, names: [a]}]
//	    forceDelete: false            # remove the finalizers of the deleted objects
//	    deleteAllResources: false     # every such object on the target, not only the item's
//	- predefinedResourceGroup: {type: namespaced-resources}   # | cluster-scoped-resources | crds | empty
//	deletionGroupsDuringUpdate: []    # the same, for objects that left the configuration
//
// Policies: manage creates, updates and deletes (and takes an object over
// from another item); fallback does so only while the object is absent or
// marked as this item's (ManagedByAnnotation: another item's object, or one
// somebody else created, is left alone); keep creates and updates but never
// deletes; ignore skips the
// manifest; immutable creates the object once and never updates or deletes it.
//
// Objects are applied in a safe order (CRDs, namespaces, other cluster-scoped
// objects, namespaced objects) by server-side apply with the deployer's name
// as field manager; status.providerStatus.managedResources lists them (in the
// configuration's apiVersion). Objects that leave the configuration are
// deleted (policy permitting) after a complete apply; while one held by
// finalizers keeps the next deletion group waiting, the job stays Progressing
// (until the item's timeout) and what is not gone yet stays listed beside the
// applied objects, as it does when a deletion fails. Deleting the item
// deletes the managed objects in the reverse order (namespaced objects, then
// cluster-scoped objects, then CRDs and namespaces), unless the item carries
// landscaper.gardener.cloud/delete-without-uninstall: "true".
//
// With deletionGroups (deletionGroupsDuringUpdate), the objects are deleted
// group by group in the order given, each group waiting until the objects
// of the one before are gone; an object no group selects is not deleted
// (and, on an update, no longer recorded). Malformed groups fail the item
// with InvalidDeletionGroup; on the item's deletion they fall back to the
// default order.
//
// Other deployers apply objects through the same machinery with ObjectSet
// and Applier (objectset.go): the helm deployer does so for helmDeployment:
// false.
//
// Exports are written to the Secret "<item>-export" (key "export", a JSON
// document of key → value), named by status.exportRef.
//
// continuousReconcile is implemented as an extension hook (ShouldReconcile):
// ContinuousReconcileHook (ScheduleHook, shared with the helm deployer); a
// schedule more frequent than Options.MinContinuousReconcileInterval fails
// the item (continuous.go; schedules: schedule.go, read by kit/cron).
//
// Invariants:
//   - Everything applied is recorded in status.providerStatus before the
//     job goes on, also after an error: deleting the item must find it.
//   - Nothing is deleted before a complete apply; an object not gone yet
//     stays recorded.
//   - An object is written or deleted only as its policy and the item's
//     mark (ManagedByAnnotation) allow; a write or deletion that depends on
//     what was read is conditional on it (UID, resourceVersion).
package manifest
