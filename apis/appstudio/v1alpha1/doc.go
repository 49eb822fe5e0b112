// Package v1alpha1 holds the appstudio.redhat.com/v1alpha1 environment
// provisioning API of seed 004: DeploymentTargets, DeploymentTargetClaims,
// DeploymentTargetClasses and Environments.
//
// +kubebuilder:object:generate=true
// +groupName=appstudio.redhat.com
package v1alpha1
