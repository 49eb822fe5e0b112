package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeploymentTargetClassSpec describes a kind of deployment target and who provisions it.
type DeploymentTargetClassSpec struct {
	// Provisioner provisions targets of this class dynamically, e.g. appstudio.redhat.com/devsandbox.
	// +kubebuilder:validation:MinLength=1
	Provisioner string `json:"provisioner"`
	// Parameters are passed to the provisioner.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
	// ReclaimPolicy says what happens to a bound target when its claim is
	// deleted: Delete deletes it, Retain keeps it (Released).
	// +kubebuilder:default=Delete
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=dtcls,categories=appstudio;terrace
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisioner`
// +kubebuilder:printcolumn:name="ReclaimPolicy",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeploymentTargetClass is a cluster-wide kind of DeploymentTarget.
type DeploymentTargetClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DeploymentTargetClassSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// DeploymentTargetClassList is a list of DeploymentTargetClasses.
type DeploymentTargetClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploymentTargetClass `json:"items"`
}
