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
	// registries: component versions and blueprints of installations, the
	// helm deployer's chart.ref.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	RegistryPullSecrets []corev1.LocalObjectReference `json:"registryPullSecrets,omitempty"`

	// RepositoryContext is where the component versions of the Context's
	// installations are read from when their spec.componentDescriptor.ref
	// names no repository.
	// +optional
	RepositoryContext *RepositoryContext `json:"repositoryContext,omitempty"`

	// UseOCM is accepted for compatibility with Landscaper, where it
	// selects the OCM library; Terrace always reads component versions the
	// same way.
	// +optional
	UseOCM bool `json:"useOCM,omitempty"`

	// ComponentVersionOverwrites names a ComponentVersionOverwrites object in
	// the Context's namespace whose overwrites apply to the component
	// versions of the Context's installations. A job of an installation
	// whose Context names one that does not exist fails.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ComponentVersionOverwrites string `json:"componentVersionOverwrites,omitempty"`
}

// +kubebuilder:object:root=true

// ContextList is a list of Contexts.
type ContextList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Context `json:"items"`
}
