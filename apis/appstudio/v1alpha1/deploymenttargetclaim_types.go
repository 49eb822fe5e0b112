package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentTargetClaimSpec asks for a DeploymentTarget of a class.
type DeploymentTargetClaimSpec struct {
	// DeploymentTargetClassName is the class of target wanted.
	// +kubebuilder:validation:MinLength=1
	DeploymentTargetClassName string `json:"deploymentTargetClassName"`
	// TargetName binds the claim to this DeploymentTarget (static binding);
	// empty lets the binder pick the best match or provision one.
	// +optional
	TargetName string `json:"targetName,omitempty"`
}

// DeploymentTargetClaimStatus is written by the binder.
type DeploymentTargetClaimStatus struct {
	// Phase: Pending, Bound or Lost.
	// +optional
	Phase DeploymentTargetClaimPhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions add detail to the phase (e.g. why a claim is not bound).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dtc,categories=appstudio;terrace
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.deploymentTargetClassName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetName`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Bound")].reason`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Bound")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeploymentTargetClaim requests a DeploymentTarget, like a PersistentVolumeClaim
// requests a PersistentVolume.
type DeploymentTargetClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeploymentTargetClaimSpec   `json:"spec"`
	Status DeploymentTargetClaimStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DeploymentTargetClaimList is a list of DeploymentTargetClaims.
type DeploymentTargetClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploymentTargetClaim `json:"items"`
}
