package v1alpha1

// Finalizer is added to a SpaceRequest when it is first reconciled.
const Finalizer = "finalizer.toolchain.dev.openshift.com"

// ConditionReady is the condition type reporting a SpaceRequest's state.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonProvisioning: the namespace and credentials are being created.
	ReasonProvisioning = "Provisioning"
	// ReasonProvisioned: the namespace and credentials are ready.
	ReasonProvisioned = "Provisioned"
	// ReasonTerminating: the SpaceRequest is being deleted.
	ReasonTerminating = "Terminating"
	// ReasonUnableToTerminate: deletion has not completed within the termination timeout (2 minutes).
	ReasonUnableToTerminate = "UnableToTerminate"
)

// AdminKubeconfigKey is the key of the kubeconfig in a namespace-access Secret.
const AdminKubeconfigKey = "kubeconfig"
