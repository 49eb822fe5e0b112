// Package v1alpha1 holds the manifest deployer's provider configuration and
// status, manifest.deployer.landscaper.gardener.cloud/v1alpha1: a plain list of
// manifests, all applied with the "manage" policy.
//
// These are not CRDs: they travel inside a DeployItem's spec.config and
// status.providerStatus.
//
// +kubebuilder:object:generate=true
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: "manifest.deployer.landscaper.gardener.cloud", Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that add these types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ProviderConfiguration{}, &ProviderStatus{})
		return nil
	})
	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// UpdateStrategy says how existing objects are updated.
type UpdateStrategy string

// Update strategies.
const (
	UpdateStrategyUpdate UpdateStrategy = "update"
	UpdateStrategyPatch  UpdateStrategy = "patch"
)

// +kubebuilder:object:root=true

// ProviderConfiguration is a manifest deploy item's spec.config.
type ProviderConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// UpdateStrategy says how existing objects are updated (default update).
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`
	// Manifests are the objects to apply.
	Manifests []runtime.RawExtension `json:"manifests,omitempty"`
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
	Policy string `json:"policy"`
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
}

// +kubebuilder:object:root=true

// ProviderStatus is a manifest deploy item's status.providerStatus.
type ProviderStatus struct {
	metav1.TypeMeta `json:",inline"`
	// ManagedResources are the objects the deployer applied, so it can remove
	// the ones that leave the configuration and delete them all on deletion.
	ManagedResources []ManagedResourceStatus `json:"managedResources,omitempty"`
}
