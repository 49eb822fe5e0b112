package v1alpha1

// Annotations of seed 004.
const (
	// ProvisionerAnnotation is set by the binder on a claim that needs dynamic
	// provisioning; its value is the class's provisioner (e.g. appstudio.redhat.com/devsandbox).
	ProvisionerAnnotation = "provisioner.appstudio.redhat.com/dt-provisioner"
	// ProvisionedByAnnotation is set by a provisioner on the targets it creates.
	ProvisionedByAnnotation = "provisioner.appstudio.redhat.com/provisioned-by"
	// SpaceRequestAnnotation is set by the sandbox provisioner on the targets it
	// creates; its value names the SpaceRequest (in the target's namespace)
	// backing the target, which the provisioner deletes when the target is
	// deleted. It survives the binder clearing the target's claimRef.
	SpaceRequestAnnotation = "provisioner.appstudio.redhat.com/spacerequest"
	// BindCompleteAnnotation ("true") is set by the binder once a claim is bound.
	BindCompleteAnnotation = "dt.appstudio.redhat.com/bind-complete"
	// BoundByControllerAnnotation ("true") is set by the binder when it, not the
	// user, chose the target.
	BoundByControllerAnnotation = "dt.appstudio.redhat.com/bound-by-controller"
	// ClaimAnnotation, on a DeploymentTarget, records the claim object its
	// spec.claimRef was written for, as "<claim name>/<claim UID>" (ClaimRecord;
	// a PersistentVolume's claimRef carries the claim's UID for the same
	// reason): spec.claimRef holds only a name, and a claim deleted by force
	// (its finalizer removed by hand) and created again under the same name is
	// another object that must not inherit a binding made for the old one. It
	// is written in the same write as the claimRef, by the binder and by the
	// sandbox provisioner (in the target's create), and removed with the
	// claimRef when the binder releases a target. A target a user pre-bound by
	// name gets it from the binder when the claim binds it (before the claim
	// turns Bound); one bound before the record existed is held by name. The value
	// holds the name too, so that a record left behind by a claimRef someone
	// rewrote by hand is ignored rather than taken for an earlier claim.
	ClaimAnnotation = "dt.appstudio.redhat.com/claim"
)

// ClaimRecord is the value of ClaimAnnotation for claim.
func ClaimRecord(claim *DeploymentTargetClaim) string {
	return claim.Name + "/" + string(claim.UID)
}

// AnnotationTrue is the value of boolean annotations.
const AnnotationTrue = "true"

// Finalizers.
const (
	// ClaimFinalizer keeps a claim until its target is dealt with per the class's reclaimPolicy.
	ClaimFinalizer = "binder.appstudio.redhat.com/finalizer"
	// TargetFinalizer keeps a provisioned target until its SpaceRequest is gone.
	TargetFinalizer = "provisioner.appstudio.redhat.com/finalizer"
)

// Labels.
const (
	// ClaimLabel on a SpaceRequest selects the claim it was created for: its
	// value is LabelValue(claim name), and the annotation of the same key
	// holds the full name (ClaimOf reads it).
	ClaimLabel = "appstudio.openshift.io/dtc"
	// ClassLabel on a SpaceRequest selects the claim's DeploymentTargetClass
	// the same way (ClassOf reads the full name).
	ClassLabel = "appstudio.openshift.io/dtcls"
)

// Provisioners.
const (
	// SandboxProvisioner provisions namespaces through SpaceRequests.
	SandboxProvisioner = "appstudio.redhat.com/devsandbox"
)

// DeploymentTargetPhase is the phase of a DeploymentTarget.
type DeploymentTargetPhase string

// DeploymentTarget phases.
const (
	DeploymentTargetPhasePending   DeploymentTargetPhase = "Pending"
	DeploymentTargetPhaseAvailable DeploymentTargetPhase = "Available"
	DeploymentTargetPhaseBound     DeploymentTargetPhase = "Bound"
	DeploymentTargetPhaseReleased  DeploymentTargetPhase = "Released"
	DeploymentTargetPhaseFailed    DeploymentTargetPhase = "Failed"
)

// DeploymentTargetClaimPhase is the phase of a DeploymentTargetClaim.
type DeploymentTargetClaimPhase string

// DeploymentTargetClaim phases.
const (
	DeploymentTargetClaimPhasePending DeploymentTargetClaimPhase = "Pending"
	DeploymentTargetClaimPhaseBound   DeploymentTargetClaimPhase = "Bound"
	DeploymentTargetClaimPhaseLost    DeploymentTargetClaimPhase = "Lost"
)

// ReclaimPolicy says what happens to a target when its claim is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

// Reclaim policies.
const (
	ReclaimPolicyDelete ReclaimPolicy = "Delete"
	ReclaimPolicyRetain ReclaimPolicy = "Retain"
)

// Condition types.
const (
	// ConditionBound reports whether a claim or target is bound, and why not.
	ConditionBound = "Bound"
)
