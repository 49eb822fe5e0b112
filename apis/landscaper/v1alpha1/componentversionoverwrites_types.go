package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=componentversionoverwrites,singular=componentversionoverwrite,shortName=compveroverwrite;cvo,categories=landscaper;terrace
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ComponentVersionOverwrites replaces component versions for the
// installations whose Context names it in componentVersionOverwrites: the
// installation's own version and every version its component references
// reach, when they are read.
type ComponentVersionOverwrites struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Overwrites are applied in order, as in Landscaper: one whose source
	// matches a version replaces the fields its substitution sets, unless
	// an earlier one replaced any of them.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Overwrites []ComponentVersionOverwrite `json:"overwrites,omitempty"`
}

// +kubebuilder:object:root=true

// ComponentVersionOverwritesList is a list of ComponentVersionOverwrites.
type ComponentVersionOverwritesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ComponentVersionOverwrites `json:"items"`
}
