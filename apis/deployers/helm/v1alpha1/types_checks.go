package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ReadinessCheckConfiguration configures when the deployed objects count as ready.
type ReadinessCheckConfiguration struct {
	// DisableDefault turns off the default check (Deployments, StatefulSets,
	// DaemonSets, Jobs and Pods must be ready).
	// +optional
	DisableDefault bool `json:"disableDefault,omitempty"`
	// Timeout bounds the wait for readiness.
	// +optional
	Timeout *lsv1alpha1.Duration `json:"timeout,omitempty"`
	// CustomReadinessChecks are checks with JSONPath requirements.
	// +optional
	CustomReadinessChecks []CustomReadinessCheckConfiguration `json:"custom,omitempty"`
}

// CustomReadinessCheckConfiguration requires the selected objects to meet
// every requirement.
type CustomReadinessCheckConfiguration struct {
	// Name identifies the check in messages.
	Name string `json:"name"`
	// Timeout bounds this check.
	// +optional
	Timeout *lsv1alpha1.Duration `json:"timeout,omitempty"`
	// Disabled switches the check off.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Resource selects objects by kind, name and namespace.
	// +optional
	Resource []TypedObjectReference `json:"resourceSelector,omitempty"`
	// LabelSelector selects objects of a kind by labels.
	// +optional
	LabelSelector *LabelSelectorSpec `json:"labelSelector,omitempty"`
	// Requirements must all hold for every selected object.
	Requirements []RequirementSpec `json:"requirements"`
	// TargetName names another Target whose cluster holds the objects.
	// +optional
	TargetName *string `json:"targetName,omitempty"`
}

// LabelSelectorSpec selects objects of one kind by labels.
type LabelSelectorSpec struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Labels     map[string]string `json:"matchLabels"`
}

// RequirementSpec is one JSONPath condition on an object.
type RequirementSpec struct {
	// JSONPath into the object, e.g. ".status.readyReplicas".
	JSONPath string `json:"jsonPath"`
	// Operator is a Kubernetes selection operator: exists, !, =, ==, !=, in, notin.
	Operator string `json:"operator"`
	// Values to compare with.
	// +optional
	Values []runtime.RawExtension `json:"values,omitempty"`
}

// TypedObjectReference names an object of any kind.
type TypedObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Exports lists the exported values.
type Exports struct {
	// DefaultTimeout bounds the wait for an exported value.
	// +optional
	DefaultTimeout *lsv1alpha1.Duration `json:"defaultTimeout,omitempty"`
	// Exports are the exported values.
	// +optional
	Exports []Export `json:"exports,omitempty"`
}

// Export is one exported value: a JSONPath into the chart values (no
// fromResource; the path starts with .Values) or into a deployed object.
type Export struct {
	// Key of the export in the export Secret's "export" document.
	Key string `json:"key"`
	// JSONPath into the values or the object.
	JSONPath string `json:"jsonPath"`
	// Timeout bounds the wait for this value.
	// +optional
	Timeout *lsv1alpha1.Duration `json:"timeout,omitempty"`
	// FromResource names the deployed object the value is read from.
	// +optional
	FromResource *TypedObjectReference `json:"fromResource,omitempty"`
	// FromObjectReference follows an object reference at jsonPath and reads
	// the value from the referenced object.
	// +optional
	FromObjectReference *FromObjectReference `json:"fromObjectRef,omitempty"`
}

// FromObjectReference is the kind of a referenced object and the path of
// the value in it.
type FromObjectReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	JSONPath   string `json:"jsonPath"`
}

// DeletionGroupDefinition is one step of an ordered deletion: a predefined
// or a custom group of objects.
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
	PredefinedResourceGroupNamespacedResources    PredefinedResourceGroupType = "namespaced-resources"
	PredefinedResourceGroupClusterScopedResources PredefinedResourceGroupType = "cluster-scoped-resources"
	PredefinedResourceGroupCRDs                   PredefinedResourceGroupType = "crds"
	PredefinedResourceGroupEmpty                  PredefinedResourceGroupType = "empty"
)

// PredefinedResourceGroup is a predefined group of objects.
type PredefinedResourceGroup struct {
	Type PredefinedResourceGroupType `json:"type,omitempty"`
	// ForceDelete removes finalizers that hold the objects.
	// +optional
	ForceDelete bool `json:"forceDelete,omitempty"`
}

// CustomResourceGroup is a group of objects by kind, name and namespace.
type CustomResourceGroup struct {
	// +optional
	Resources []ResourceType `json:"resources,omitempty"`
	// ForceDelete removes finalizers that hold the objects.
	// +optional
	ForceDelete bool `json:"forceDelete,omitempty"`
	// DeleteAllResources deletes all objects of the kinds, not only the
	// deployed ones.
	// +optional
	DeleteAllResources bool `json:"deleteAllResources,omitempty"`
}

// ResourceType selects objects of one kind, optionally by names and namespaces.
type ResourceType struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
}
