// Package v1alpha1 holds the landscaper.gardener.cloud/v1alpha1 API that
// Terrace's orchestration half speaks: Installations, Executions, DeployItems,
// Targets, DataObjects and Contexts. Field names are wire-compatible with the
// published Landscaper API, so YAML written for Landscaper applies unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=landscaper.gardener.cloud
package v1alpha1
