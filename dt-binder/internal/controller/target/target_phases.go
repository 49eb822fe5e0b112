package target

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/kit/flow"
)

// reconcileBinding sets the phase of a target that is not being deleted:
//   - no claimRef: Available, or Released if it was bound before (rule A/C:
//     a Released target is not bound again until an operator makes it
//     Available);
//   - claimRef naming a claim that is gone, while the target records the
//     claim object it was bound for (ClaimAnnotation): that claim was deleted
//     without its finalizer running, so the reclaimPolicy of the target's
//     class is applied for it (reclaimGoneClaim), as the PV controller does
//     for a volume whose bound claim UID does not exist;
//   - claimRef naming a claim that is gone, no record: Released if it was
//     bound before (rule A), else Pending (reserved for a claim yet to come:
//     a user pre-bound it, or it carries no record);
//   - claimRef naming a claim being deleted that has not bound this target:
//     Pending, ClaimDeleting (a claim being deleted binds nothing new);
//   - claimRef naming an existing claim that takes this target: Bound (step 7);
//     Bound too, reason ClassChanged, when the claim's class was changed
//     after it bound this target (the claim keeps it);
//   - otherwise Pending, with the reason in the Bound condition.
func (r *Reconciler) reconcileBinding(ctx context.Context, s *scope) (flow.Result, error) {
	t := s.target
	prev := t.Status.Phase
	wasBound := prev == appstudiov1alpha1.DeploymentTargetPhaseBound || prev == appstudiov1alpha1.DeploymentTargetPhaseReleased

	if t.Spec.ClaimRef == nil || t.Spec.ClaimRef.Name == "" {
		s.unclaimed(wasBound)
		return flow.Continue(), nil
	}
	name := t.Spec.ClaimRef.Name
	recorded := binding.RecordedClaimUID(t)
	if prev == appstudiov1alpha1.DeploymentTargetPhaseReleased && recorded == "" {
		// A claim of the same name appearing later is a new claim, not the
		// one this target served: it must not inherit the target.
		return flow.Continue(), nil
	}
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, claim)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return flow.Continue(), fmt.Errorf("getting claim %s: %w", name, err)
	case err != nil && recorded != "":
		return flow.Continue(), r.reclaimGoneClaim(ctx, s, wasBound)
	case prev == appstudiov1alpha1.DeploymentTargetPhaseReleased:
		// Released, and a claim of its name exists: a new claim (the claim
		// reconciler applies the policy for the old one, reclaimEarlier),
		// or the one it was bound to, which let it go. Either way it is
		// not bound again.
		return flow.Continue(), nil
	case err != nil:
		s.claimGone(nil, wasBound)
		return flow.Continue(), nil
	case binding.ForEarlierClaim(t, claim):
		// A claim of that name that is not the object the claimRef was
		// written for (its UID differs from the recorded one) is a new
		// claim: the one this target was bound to is gone, as for a
		// PersistentVolume whose claimRef UID does not exist. The claim
		// reconciler applies the target's reclaimPolicy for the gone claim.
		s.claimGone(claim, wasBound)
		return flow.Continue(), nil
	case claim.DeletionTimestamp != nil && prev != appstudiov1alpha1.DeploymentTargetPhaseBound:
		// A claim being deleted binds nothing new: its finalizer applies the
		// reclaimPolicy to this target if the claim holds it by a durable
		// fact (binding.ReclaimedTarget; a late one is left to its
		// provisioner); one that only names the claim is left as it is,
		// ClaimNotFound once the claim is gone.
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimDeleting,
			fmt.Sprintf("claim %s is being deleted and never bound this target", name))
		return flow.Continue(), nil
	}
	return flow.Continue(), r.followClaim(ctx, s, claim)
}

// claimGone sets the phase of a target whose claim is gone: deleted (newer
// nil), or replaced by newer, another claim object of the same name.
// Released if it was bound, else Pending, reserved for the claim's name.
func (s *scope) claimGone(newer *appstudiov1alpha1.DeploymentTargetClaim, wasBound bool) {
	name := s.target.Spec.ClaimRef.Name
	gone := fmt.Sprintf("claim %s was deleted", name)
	if newer != nil {
		gone = fmt.Sprintf("claim %s (UID %s) was deleted; the claim now of that name (UID %s) is another object and does not inherit this target",
			name, binding.RecordedClaimUID(s.target), newer.UID)
	}
	switch {
	case wasBound:
		s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased, gone)
	case newer != nil:
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimNotFound,
			"reserved for a claim that is gone: "+gone)
	default:
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimNotFound,
			fmt.Sprintf("reserved for claim %s, which does not exist", name))
	}
}

// followClaim sets the phase of a target whose claimRef names an existing
// claim: Bound when the claim takes it, else Pending with the reason. A
// target the claim does not need (bound elsewhere) has its policy applied.
func (r *Reconciler) followClaim(ctx context.Context, s *scope, claim *appstudiov1alpha1.DeploymentTargetClaim) error {
	t, name := s.target, claim.Name
	named, err := binding.TargetsNamingClaim(ctx, r.Client, t.Namespace, name)
	if err != nil {
		return err
	}
	if held := boundElsewhere(claim, t, named); held != "" {
		return r.reclaimForClaimBoundElsewhere(ctx, s, claim, held)
	}
	held := binding.HeldTarget(claim, named)
	keeps := held != nil && held.Name == t.Name
	switch {
	case claim.Spec.DeploymentTargetClassName != t.Spec.DeploymentTargetClassName && keeps:
		// The claim's class was changed after it bound this target: the
		// claim keeps it (and reports ClassChanged), so the target stays
		// Bound, under its own class.
		s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonClassChanged,
			fmt.Sprintf("bound to claim %s, whose class was changed to %q after binding; this target keeps class %q and its reclaimPolicy",
				name, claim.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName))
	case claim.Spec.DeploymentTargetClassName != t.Spec.DeploymentTargetClassName:
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClassMismatch,
			fmt.Sprintf("claim %s asks for class %q, this target is of class %q", name, claim.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName))
	case claim.Spec.TargetName != "" && claim.Spec.TargetName != t.Name && keeps && binding.BindComplete(claim):
		// spec.targetName was changed after the claim bound this target:
		// the claim keeps it (and reports TargetNameConflict), so the
		// target stays Bound. Reported Pending, the claim would read as
		// unbound to everything deciding from this status.
		s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonBound,
			fmt.Sprintf("bound to claim %s, whose spec.targetName was changed to %s after binding; the claim keeps this target", name, claim.Spec.TargetName))
	case claim.Spec.TargetName != "" && claim.Spec.TargetName != t.Name:
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimHasOtherTarget,
			fmt.Sprintf("claim %s asks for target %s", name, claim.Spec.TargetName))
	default:
		s.boundTo(claim, named)
	}
	return nil
}

// boundTo sets Bound, unless the claim is bound to another target of those
// naming it.
func (s *scope) boundTo(claim *appstudiov1alpha1.DeploymentTargetClaim, named []appstudiov1alpha1.DeploymentTarget) {
	if chosen := binding.BoundTarget(claim, named); chosen != nil && chosen.Name != s.target.Name {
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimHasOtherTarget,
			fmt.Sprintf("claim %s is bound to target %s", claim.Name, chosen.Name))
		return
	}
	s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonBound,
		fmt.Sprintf("bound to claim %s", claim.Name))
}

// unclaimed sets the phase of a target without claimRef: Released if it was
// bound before (a Released target is not bound again until an operator sets
// its phase to Available), else Available.
func (s *scope) unclaimed(wasBound bool) {
	if wasBound {
		s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased,
			"its claim released it; it is not bound again until its phase is set to Available")
		return
	}
	s.set(appstudiov1alpha1.DeploymentTargetPhaseAvailable, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonAvailable,
		"unclaimed; can be bound to a claim of class "+s.target.Spec.DeploymentTargetClassName)
}
