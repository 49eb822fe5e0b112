package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=dobj;do,categories=landscaper;terrace
// The installation context it belongs to, and its name there (written by the
// installation controller on the objects it writes).
// +kubebuilder:printcolumn:name="Context",type=string,JSONPath=`.metadata.labels.installation\.terrace\.dev/context`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.metadata.annotations.installation\.terrace\.dev/key`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DataObject holds one data value an installation imports or exports.
type DataObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data is the value, any JSON.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Data AnyJSON `json:"data,omitempty"`
}

// +kubebuilder:object:root=true

// DataObjectList is a list of DataObjects.
type DataObjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataObject `json:"items"`
}
