package v1alpha1

// Condition types and reasons written by the dt-binder. They live here, beside
// the types, so that users (kubectl, alerts) and other controllers can match on
// them without importing the binder.

// ConditionTerminating reports, on a DeploymentTarget that is being deleted,
// what its deletion waits for (the SpaceRequest) and whether it failed.
const ConditionTerminating = "Terminating"

// Reasons of the Bound condition on a DeploymentTargetClaim.
const (
	// BindReasonBound: the claim is bound; the message names the target.
	BindReasonBound = "Bound"
	// BindReasonProvisioning: no target matched; the claim is marked for dynamic
	// provisioning and waits for the class's provisioner to create a target.
	BindReasonProvisioning = "Provisioning"
	// BindReasonWaitingForTarget: a target names the claim in its claimRef and
	// the binder waits for the target itself to report Bound.
	BindReasonWaitingForTarget = "WaitingForTarget"
	// BindReasonTargetNotFound: spec.targetName names a target that does not exist.
	BindReasonTargetNotFound = "TargetNotFound"
	// BindReasonClassMismatch: the named target is of another class; it is never bound.
	BindReasonClassMismatch = "ClassMismatch"
	// BindReasonTargetClaimedByOther: the named target is claimed by another claim; it is never bound.
	BindReasonTargetClaimedByOther = "TargetClaimedByOther"
	// BindReasonTargetNotAvailable: the named target is Released, Failed or being deleted.
	BindReasonTargetNotAvailable = "TargetNotAvailable"
	// BindReasonTargetNameConflict: spec.targetName names another target
	// than the one already bound to the claim; the binder binds no second.
	BindReasonTargetNameConflict = "TargetNameConflict"
	// BindReasonClassChanged: the claim is bound, but its
	// spec.deploymentTargetClassName was changed after it bound its target.
	// The claim keeps that target (a claim binds one target, and a class
	// change never moves it); the class the target was bound under decides
	// its reclaim policy when the claim goes.
	BindReasonClassChanged = "ClassChanged"
	// BindReasonClassAndTargetNameChanged: the claim is bound, but both its
	// spec.deploymentTargetClassName and its spec.targetName were changed
	// after it bound its target. As for a class change alone (ClassChanged)
	// the claim keeps its target, so neither change takes effect; the
	// condition's message and a Warning Event name both.
	BindReasonClassAndTargetNameChanged = "ClassAndTargetNameChanged"
	// BindReasonClassNotFound: the claim's DeploymentTargetClass does not exist.
	BindReasonClassNotFound = "ClassNotFound"
	// BindReasonTargetLost: the bound target was deleted or released; the claim is Lost.
	BindReasonTargetLost = "TargetLost"
	// BindReasonDeletingTarget: the claim is being deleted and waits for its
	// target to be deleted (reclaimPolicy Delete).
	BindReasonDeletingTarget = "DeletingTarget"
)

// Reasons of the Bound condition on a DeploymentTarget.
const (
	// TargetReasonBound: the target is bound to the claim its claimRef names.
	TargetReasonBound = "Bound"
	// TargetReasonAvailable: the target is unclaimed and can be bound.
	TargetReasonAvailable = "Available"
	// TargetReasonReleased: the target's claim was deleted (or let it go); it is
	// not bound again automatically.
	TargetReasonReleased = "Released"
	// TargetReasonClaimNotFound: claimRef names a claim that does not exist (yet).
	TargetReasonClaimNotFound = "ClaimNotFound"
	// TargetReasonClaimDeleting: claimRef names a claim that is being deleted
	// and never bound this target; a claim being deleted binds nothing new.
	TargetReasonClaimDeleting = "ClaimDeleting"
	// TargetReasonClassMismatch: claimRef names a claim of another class.
	TargetReasonClassMismatch = "ClassMismatch"
	// TargetReasonClassChanged: the target is bound to the claim its claimRef
	// names, whose spec.deploymentTargetClassName was changed after binding;
	// the target keeps its own class and stays bound.
	TargetReasonClassChanged = "ClassChanged"
	// TargetReasonClaimHasOtherTarget: the claim is bound to, or asks for, another target.
	TargetReasonClaimHasOtherTarget = "ClaimHasOtherTarget"
)

// Reasons of the Terminating condition on a DeploymentTarget.
const (
	// TerminatingReasonWaitingForSpaceRequest: the target's SpaceRequest is still being deleted.
	TerminatingReasonWaitingForSpaceRequest = "WaitingForSpaceRequest"
	// TerminatingReasonUnableToTerminate: the SpaceRequest reported
	// UnableToTerminate for longer than the binder's timeout; the target is Failed.
	TerminatingReasonUnableToTerminate = "UnableToTerminate"
	// TerminatingReasonSpaceRequestGone: no SpaceRequest is left; the provisioner removes its finalizer.
	TerminatingReasonSpaceRequestGone = "SpaceRequestGone"
)
