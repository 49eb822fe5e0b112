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
}

// ContinuousReconcileSpec says how often a finished item is reconciled again.
type ContinuousReconcileSpec struct {
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
	// Resource is the applied object.
	Resource TypedObjectReference `json:"resource"`
}

// +kubebuilder:object:root=true

// ProviderStatus is a manifest deploy item's status.providerStatus.
type ProviderStatus struct {
	metav1.TypeMeta `json:",inline"`
	// ManagedResources are the objects the deployer applied.
	ManagedResources []ManagedResourceStatus `json:"managedResources,omitempty"`
}
