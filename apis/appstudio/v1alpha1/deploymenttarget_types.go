package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentTargetKubernetesClusterCredentials say how to reach the target.
type DeploymentTargetKubernetesClusterCredentials struct {
	// DefaultNamespace is the namespace deployments go to.
	// +optional
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// APIURL is the URL of the cluster's API server.
	// +kubebuilder:validation:MinLength=1
	APIURL string `json:"apiURL"`
	// ClusterCredentialsSecret names a Secret in the target's namespace holding a
	// kubeconfig (key "kubeconfig") for the cluster.
	// +kubebuilder:validation:MinLength=1
	ClusterCredentialsSecret string `json:"clusterCredentialsSecret"`
	// AllowInsecureSkipTLSVerify skips TLS verification of the API server.
	// +optional
	AllowInsecureSkipTLSVerify bool `json:"allowInsecureSkipTLSVerify,omitempty"`
}

// DeploymentTargetClaimReference names the claim a target is bound to.
type DeploymentTargetClaimReference struct {
	// Name of the DeploymentTargetClaim in the target's namespace.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// DeploymentTargetSpec describes a target environment.
type DeploymentTargetSpec struct {
	// DeploymentTargetClassName is the target's class.
	// +kubebuilder:validation:MinLength=1
	DeploymentTargetClassName string `json:"deploymentTargetClassName"`
	// KubernetesClusterCredentials say how to reach the target.
	KubernetesClusterCredentials DeploymentTargetKubernetesClusterCredentials `json:"kubernetesCredentials"`
	// ClaimRef names the claim this target is (being) bound to. The binder
	// writes it when it binds, a provisioner when it provisions for a claim.
	// +optional
	ClaimRef *DeploymentTargetClaimReference `json:"claimRef,omitempty"`
}

// TargetConditionReady is a DeploymentTarget's summary condition, which the
// binder writes with every status write, and which kubectl get dt shows under
// Reason (and, -o wide, Message). Status True: the target is in service — not
// being deleted, and phase Available (it can be bound) or Bound (its claim can
// deploy to it); False otherwise (Pending, Released, Failed, being deleted).
// Its reason and message are those of the condition that explains the phase
// now: the Terminating condition's while the target is being deleted
// (WaitingForSpaceRequest, UnableToTerminate, SpaceRequestGone; Deleting if
// there is none), the Bound condition's otherwise. The Bound condition keeps
// describing the binding alone, so a target that turned Failed while being
// deleted still says which claim it was bound to.
const TargetConditionReady = "Ready"

// TargetReasonDeleting is the Ready reason of a target being deleted that has
// no Terminating condition (nothing names a SpaceRequest the binder follows).
const TargetReasonDeleting = "Deleting"

// DeploymentTargetStatus is written by the binder.
type DeploymentTargetStatus struct {
	// Phase: Pending, Available, Bound, Released or Failed.
	// +optional
	Phase DeploymentTargetPhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions add detail to the phase: Bound (the binding), Terminating
	// (while being deleted) and Ready (what the phase means now; kubectl get
	// dt shows its reason and message).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dt,categories=appstudio;terrace
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.deploymentTargetClassName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claimRef.name`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.kubernetesCredentials.defaultNamespace`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeploymentTarget is an environment (e.g. a namespace on a cluster) that
// applications can be deployed to.
type DeploymentTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeploymentTargetSpec   `json:"spec"`
	Status DeploymentTargetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DeploymentTargetList is a list of DeploymentTargets.
type DeploymentTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploymentTarget `json:"items"`
}
