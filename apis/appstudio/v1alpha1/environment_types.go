package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentStrategy says how applications are promoted into an environment.
// +kubebuilder:validation:Enum=AppStudioAutomated;Manual
type DeploymentStrategy string

// EnvVarPair is one environment variable of an environment's configuration.
type EnvVarPair struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the variable.
	Value string `json:"value"`
}

// DeploymentTargetClaimConfig names the claim whose target an environment deploys to.
type DeploymentTargetClaimConfig struct {
	// ClaimName is a DeploymentTargetClaim in the environment's namespace.
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`
}

// EnvironmentTarget is where an environment deploys to.
type EnvironmentTarget struct {
	// DeploymentTargetClaim names the claim whose bound target is used.
	DeploymentTargetClaim DeploymentTargetClaimConfig `json:"deploymentTargetClaim"`
}

// EnvironmentConfiguration configures an environment.
type EnvironmentConfiguration struct {
	// Env are environment variables for the applications deployed here.
	// +optional
	Env []EnvVarPair `json:"env,omitempty"`
	// Target is where the environment deploys to.
	// +optional
	Target *EnvironmentTarget `json:"target,omitempty"`
}

// EnvironmentSpec describes an application environment.
type EnvironmentSpec struct {
	// DisplayName is a human-friendly name.
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// DeploymentStrategy says how applications are promoted here.
	// +optional
	DeploymentStrategy DeploymentStrategy `json:"deploymentStrategy,omitempty"`
	// ParentEnvironment is the environment promoted from.
	// +optional
	ParentEnvironment string `json:"parentEnvironment,omitempty"`
	// Tags categorise the environment.
	// +optional
	Tags []string `json:"tags,omitempty"`
	// Configuration of the environment.
	// +optional
	Configuration EnvironmentConfiguration `json:"configuration,omitempty"`
}

// EnvironmentStatus reports the environment's state.
type EnvironmentStatus struct {
	// Conditions report the environment's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=env,categories=appstudio;terrace
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.configuration.target.deploymentTargetClaim.claimName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Environment is an application environment; with a target configured it
// deploys to the target bound to a DeploymentTargetClaim.
type Environment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EnvironmentSpec   `json:"spec"`
	Status EnvironmentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EnvironmentList is a list of Environments.
type EnvironmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Environment `json:"items"`
}
