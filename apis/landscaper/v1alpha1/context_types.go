package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=lsctx,categories=landscaper;terrace
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Context holds configuration shared by the installations, executions and
// deploy items of a namespace. A missing Context named "default" counts as empty.
type Context struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Configurations are named values templates can read as .context.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Configurations map[string]AnyJSON `json:"configurations,omitempty"`

	// RegistryPullSecrets name kubernetes.io/dockerconfigjson Secrets in the
	// Context's namespace whose credentials are used to pull from OCI
	// registries (the helm deployer's chart.ref).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	RegistryPullSecrets []corev1.LocalObjectReference `json:"registryPullSecrets,omitempty"`
}

// +kubebuilder:object:root=true

// ContextList is a list of Contexts.
type ContextList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Context `json:"items"`
}
