package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpaceRequestSpec asks for a namespace.
type SpaceRequestSpec struct {
	// TierName selects the kind of space (e.g. appstudio-env).
	// +kubebuilder:validation:MinLength=1
	TierName string `json:"tierName"`
	// TargetClusterRoles selects clusters by role label; optional.
	// +optional
	// +listType=set
	TargetClusterRoles []string `json:"targetClusterRoles,omitempty"`
}

// NamespaceAccess is one provisioned namespace and the Secret granting access to it.
type NamespaceAccess struct {
	// Name of the namespace.
	Name string `json:"name"`
	// SecretRef names a Secret in the SpaceRequest's namespace holding a
	// kubeconfig (key "kubeconfig") scoped to the namespace.
	SecretRef string `json:"secretRef"`
}

// SpaceRequestStatus reports what was provisioned.
type SpaceRequestStatus struct {
	// TargetClusterURL is the API URL of the cluster the namespace lives on.
	// +optional
	TargetClusterURL string `json:"targetClusterURL,omitempty"`
	// NamespaceAccess lists the provisioned namespaces.
	// +optional
	NamespaceAccess []NamespaceAccess `json:"namespaceAccess,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready with reason Provisioning, Provisioned, Terminating or UnableToTerminate.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sr,categories=toolchain;terrace
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tierName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.status.namespaceAccess[0].name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SpaceRequest requests a namespace with scoped credentials.
type SpaceRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SpaceRequestSpec   `json:"spec"`
	Status SpaceRequestStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SpaceRequestList is a list of SpaceRequests.
type SpaceRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpaceRequest `json:"items"`
}
