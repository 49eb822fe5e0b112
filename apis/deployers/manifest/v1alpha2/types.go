// Package v1alpha2 holds the manifest deployer's provider configuration and
// status, manifest.deployer.landscaper.gardener.cloud/v1alpha2: manifests with
// a per-object policy.
//
// These are not CRDs: they travel inside a DeployItem's spec.config and
// status.providerStatus.
//
// +kubebuilder:object:generate=true
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: "manifest.deployer.landscaper.gardener.cloud", Version: "v1alpha2"}

var (
	// SchemeBuilder collects the functions that add these types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ProviderConfiguration{}, &ProviderStatus{})
		return nil
	})
	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// ManifestPolicy says how the deployer treats one object.
type ManifestPolicy string

// Manifest policies.
const (
	// ManagePolicy creates, updates and deletes the object.
	ManagePolicy ManifestPolicy = "manage"
	// FallbackPolicy manages the object only while nobody else does.
	FallbackPolicy ManifestPolicy = "fallback"
	// KeepPolicy creates and updates the object but never deletes it.
	KeepPolicy ManifestPolicy = "keep"
	// IgnorePolicy skips the object.
	IgnorePolicy ManifestPolicy = "ignore"
	// ImmutablePolicy creates the object but never updates or deletes it.
	ImmutablePolicy ManifestPolicy = "immutable"
)

// UpdateStrategy says how existing objects are updated.
type UpdateStrategy string

// Update strategies.
const (
	UpdateStrategyUpdate UpdateStrategy = "update"
	UpdateStrategyPatch  UpdateStrategy = "patch"
)

// Manifest is one object with its policy.
type Manifest struct {
	// Policy for the object (default manage).
	// +optional
	Policy ManifestPolicy `json:"policy,omitempty"`
	// Manifest is the object.
	Manifest *runtime.RawExtension `json:"manifest,omitempty"`
	// AnnotateBeforeCreate are annotations the object gets when the
	// deployer creates it; an existing object does not get them.
	// +optional
	AnnotateBeforeCreate map[string]string `json:"annotateBeforeCreate,omitempty"`
	// AnnotateBeforeDelete are annotations set on the object right before
	// the deployer deletes it (e.g. a deletion confirmation).
	// +optional
	AnnotateBeforeDelete map[string]string `json:"annotateBeforeDelete,omitempty"`
	// PatchAfterDeployment is a JSON merge patch applied to the object
	// after each apply of it.
	// +optional
	PatchAfterDeployment *runtime.RawExtension `json:"patchAfterDeployment,omitempty"`
	// PatchBeforeDelete is a JSON merge patch applied to the object right
	// before the deployer deletes it.
	// +optional
	PatchBeforeDelete *runtime.RawExtension `json:"patchBeforeDelete,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderConfiguration is a manifest deploy item's spec.config.
type ProviderConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// UpdateStrategy says how existing objects are updated (default update).
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`
	// Manifests are the objects to apply.
	Manifests []Manifest `json:"manifests,omitempty"`
	// ContinuousReconcile, when set, re-applies the manifests periodically to
	// correct drift on the target.
	// +optional
	ContinuousReconcile *ContinuousReconcileSpec `json:"continuousReconcile,omitempty"`
	// ReadinessChecks configures when the applied objects count as ready.
	// +optional
	ReadinessChecks ReadinessCheckConfiguration `json:"readinessChecks,omitempty"`
	// Exports are values read from applied objects and written to the item's
	// export Secret (status.exportRef).
	// +optional
	Exports *ExportConfiguration `json:"exports,omitempty"`
	// DeletionGroups orders the deletion of the managed objects when the
	// item is deleted (default: namespaced objects, cluster-scoped objects,
	// namespaces, CRDs). Objects no group selects are not deleted.
	// +optional
	DeletionGroups []DeletionGroupDefinition `json:"deletionGroups,omitempty"`
	// DeletionGroupsDuringUpdate orders the deletion of objects that leave
	// the configuration, as DeletionGroups does on the item's deletion.
	// +optional
	DeletionGroupsDuringUpdate []DeletionGroupDefinition `json:"deletionGroupsDuringUpdate,omitempty"`
}

// DeletionGroupDefinition is one step of an ordered deletion: exactly one
// of a predefined or a custom group of objects. The next step starts once
// the objects of this one are gone.
type DeletionGroupDefinition struct {
	// +optional
	PredefinedResourceGroup *PredefinedResourceGroup `json:"predefinedResourceGroup,omitempty"`
	// +optional
	CustomResourceGroup *CustomResourceGroup `json:"customResourceGroup,omitempty"`
}

// PredefinedResourceGroupType names a predefined group.
type PredefinedResourceGroupType string

// Predefined groups.
const (
	// PredefinedResourceGroupNamespacedResources: the namespaced objects.
	PredefinedResourceGroupNamespacedResources PredefinedResourceGroupType = "namespaced-resources"
	// PredefinedResourceGroupClusterScopedResources: the cluster-scoped
	// objects except CustomResourceDefinitions.
	PredefinedResourceGroupClusterScopedResources PredefinedResourceGroupType = "cluster-scoped-resources"
	// PredefinedResourceGroupCRDs: the CustomResourceDefinitions.
	PredefinedResourceGroupCRDs PredefinedResourceGroupType = "crds"
	// PredefinedResourceGroupEmpty: no objects.
	PredefinedResourceGroupEmpty PredefinedResourceGroupType = "empty"
)

// PredefinedResourceGroup is a predefined group of objects.
type PredefinedResourceGroup struct {
	Type PredefinedResourceGroupType `json:"type,omitempty"`
	// ForceDelete removes the finalizers of the group's objects once they
	// are deleted.
	// +optional
	ForceDelete bool `json:"forceDelete,omitempty"`
}

// CustomResourceGroup is a group of objects by kind, name and namespace.
type CustomResourceGroup struct {
	// Resources select the group's objects.
	// +optional
	Resources []ResourceType `json:"resources,omitempty"`
	// ForceDelete removes the finalizers of the group's objects once they
	// are deleted.
	// +optional
	ForceDelete bool `json:"forceDelete,omitempty"`
	// DeleteAllResources deletes every object on the target the resources
	// select, not only the item's.
	// +optional
	DeleteAllResources bool `json:"deleteAllResources,omitempty"`
}

// ResourceType selects objects of one kind, optionally by names and namespaces.
type ResourceType struct {
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is the kind (ConfigMap) or its resource name (configmaps).
	Kind string `json:"kind,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
}

// ReadinessCheckConfiguration configures the readiness checks of a manifest item.
type ReadinessCheckConfiguration struct {
	// DisableDefault turns off the default check (Deployments, StatefulSets,
	// DaemonSets, Jobs and Pods the deployer applied must be ready).
	// +optional
	DisableDefault bool `json:"disableDefault,omitempty"`
	// Timeout bounds the wait for readiness (default: the item's spec.timeout).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// CustomReadinessChecks are additional checks with JSONPath requirements.
	// +optional
	CustomReadinessChecks []CustomReadinessCheck `json:"custom,omitempty"`
}

// CustomReadinessCheck requires the selected objects to meet every requirement.
type CustomReadinessCheck struct {
	// Name identifies the check in messages.
	Name string `json:"name"`
	// Resource selects the objects the check applies to.
	// +optional
	Resource []TypedObjectReference `json:"resourceSelector,omitempty"`
	// LabelSelector selects the objects of a kind that carry all the
	// labels, in every namespace; the check waits while none matches.
	// +optional
	LabelSelector *LabelSelectorSpec `json:"labelSelector,omitempty"`
	// Requirements must all hold for every selected object.
	Requirements []ReadinessRequirement `json:"requirements"`
}

// LabelSelectorSpec selects objects of one kind by labels.
type LabelSelectorSpec struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Labels     map[string]string `json:"matchLabels"`
}

// ReadinessOperator compares the value at a JSONPath with the given values.
type ReadinessOperator string

// Readiness operators.
const (
	// ReadinessOperatorExists requires the path to exist.
	ReadinessOperatorExists ReadinessOperator = "exists"
	// ReadinessOperatorNotExists requires the path not to exist.
	ReadinessOperatorNotExists ReadinessOperator = "notExists"
	// ReadinessOperatorEquals requires the value to equal the first value.
	ReadinessOperatorEquals ReadinessOperator = "=="
	// ReadinessOperatorNotEquals requires the value to differ from the first value.
	ReadinessOperatorNotEquals ReadinessOperator = "!="
	// ReadinessOperatorIn requires the value to equal one of the values.
	ReadinessOperatorIn ReadinessOperator = "in"
	// ReadinessOperatorNotIn requires the value to equal none of the values.
	ReadinessOperatorNotIn ReadinessOperator = "notIn"
)

// ReadinessRequirement is one JSONPath condition on an object.
type ReadinessRequirement struct {
	// JSONPath into the object, e.g. "{.status.phase}" or ".status.phase".
	JSONPath string `json:"jsonPath"`
	// Operator compares the value: exists, notExists, ==, !=, in, notIn.
	Operator ReadinessOperator `json:"operator"`
	// Values to compare with (strings; JSON values compare by their JSON text
	// unless they are strings).
	// +optional
	Values []string `json:"values,omitempty"`
}

// ExportConfiguration lists the values exported from applied objects.
type ExportConfiguration struct {
	// Exports are the exported values.
	// +optional
	Exports []Export `json:"exports,omitempty"`
}

// Export is one exported value: the JSONPath in one applied object.
type Export struct {
	// Key of the export in the export Secret's "export" document.
	Key string `json:"key"`
	// JSONPath into the object, e.g. ".spec.clusterIP".
	JSONPath string `json:"jsonPath"`
	// FromResource names the object (it must be one of the item's manifests).
	FromResource *TypedObjectReference `json:"fromResource,omitempty"`
	// FromObjectReference, when set, takes the value at jsonPath as a
	// reference (name, namespace: default the object's) to another object
	// and exports the value at its jsonPath in that object.
	// +optional
	FromObjectReference *FromObjectReference `json:"fromObjectRef,omitempty"`
}

// FromObjectReference is the kind of a referenced object and the path of
// the exported value in it.
type FromObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	JSONPath   string `json:"jsonPath"`
}

// ContinuousReconcileSpec says how often a finished item is reconciled
// again: at most one of cron and every.
type ContinuousReconcileSpec struct {
	// Cron is a five-field crontab schedule, in UTC (e.g. "0 */6 * * *").
	// +optional
	Cron string `json:"cron,omitempty"`
	// Every is the interval between reconciles (e.g. "5m").
	// +optional
	Every *metav1.Duration `json:"every,omitempty"`
}

// TypedObjectReference names an object of any kind.
type TypedObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
}

// ManagedResourceStatus is one object the deployer applied.
type ManagedResourceStatus struct {
	// Policy the object was applied with.
	Policy ManifestPolicy `json:"policy"`
	// UpdateStrategy is the item's updateStrategy when the deployer last
	// applied the object, recorded when it is patch: what a merge patch sets
	// belongs to the deployer's Update field manager, which a server-side
	// apply never removes, so a switch to update hands those fields over to
	// the apply once. Absent: update (server-side apply; also every record
	// written before this field existed), or an immutable object.
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`
	// Resource is the applied object.
	Resource TypedObjectReference `json:"resource"`
	// AnnotateBeforeDelete and PatchBeforeDelete are the manifest's, kept
	// so that an object that left the configuration gets them too.
	// +optional
	AnnotateBeforeDelete map[string]string `json:"annotateBeforeDelete,omitempty"`
	// +optional
	PatchBeforeDelete *runtime.RawExtension `json:"patchBeforeDelete,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderStatus is a manifest deploy item's status.providerStatus.
type ProviderStatus struct {
	metav1.TypeMeta `json:",inline"`
	// ManagedResources are the objects the deployer applied.
	ManagedResources []ManagedResourceStatus `json:"managedResources,omitempty"`
}
