// Package v1alpha1 holds the toolchain.dev.openshift.com/v1alpha1 SpaceRequest
// API: a request for a namespace with scoped credentials, served in Terrace by
// the spacerequest-stub controller.
//
// +kubebuilder:object:generate=true
// +groupName=toolchain.dev.openshift.com
package v1alpha1
