package claim

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/kit/flow"
)

// bind decides the claim's binding (seed 004 steps 3, 7, 8 and the binder
// flowchart): static by spec.targetName, a target already naming the claim,
// Lost, best match, or dynamic provisioning.
func (r *Reconciler) bind(ctx context.Context, s *scope) (flow.Result, error) {
	c := s.claim
	if t := binding.HeldTarget(c, s.named); t != nil && t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName {
		// spec.deploymentTargetClassName was changed after the claim bound
		// t. Like a bound PersistentVolumeClaim, the claim keeps its target
		// (binding another would leave t claimed for ever, and whoever uses
		// the claim would lose its environment); it stays Bound, reason
		// ClassChanged (see bound), and t's class decides the reclaim.
		r.follow(s, t)
		return flow.Continue(), nil
	}
	if c.Spec.TargetName != "" {
		return flow.Continue(), r.bindStatic(ctx, s)
	}
	if t := binding.BoundTarget(c, s.named); t != nil {
		if wrote, err := r.recordClaim(ctx, s, t); wrote || err != nil {
			return flow.Continue(), err
		}
		r.follow(s, t)
		return flow.Continue(), nil
	}
	if wasBound(c) {
		s.lost("its target is gone")
		return flow.Continue(), nil
	}
	if reason, why := whyNotEligible(c, s.named); why != "" {
		s.pending(reason, why)
		return flow.Continue(), nil
	}
	if s.class == nil {
		return flow.Continue(), s.classMissing()
	}
	if p := c.Annotations[appstudiov1alpha1.ProvisionerAnnotation]; p != "" {
		r.awaitProvisioner(s, p)
		return flow.Continue(), nil
	}
	return r.bindBestMatch(ctx, s)
}

// follow reports the state of the target bound (or being bound) to the claim.
// The claim turns Bound only after the target reports Bound (steps 7 then 8).
func (r *Reconciler) follow(s *scope, t *appstudiov1alpha1.DeploymentTarget) {
	switch {
	case t.DeletionTimestamp != nil && wasBound(s.claim):
		s.lost(fmt.Sprintf("target %s is being deleted", t.Name))
	case t.DeletionTimestamp != nil:
		s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable, fmt.Sprintf("target %s is being deleted", t.Name))
	case t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound:
		s.bound(t)
		s.link = t.Annotations
	case provisioning(s.claim):
		// The provisioned target has appeared but not reported Bound yet:
		// the claim stays Pending, Provisioning until it turns Bound (no
		// status write for the moment in between).
	default:
		s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
			fmt.Sprintf("target %s names this claim; waiting for it to report Bound", t.Name))
	}
}

// whyNotEligible explains why a target that names the claim is not bound to
// it (another class: a user pre-bound it by mistake, and the claim waits for
// the user to fix one or the other); empty when no such target names the
// claim. A Released target naming the claim does not count: it was let go by
// an earlier claim of the same name and is never bound again automatically,
// so waiting for it would leave the claim Pending for ever; the claim binds
// as if it were not there (best match, or dynamic provisioning), and its
// message says so (releasedNote).
func whyNotEligible(c *appstudiov1alpha1.DeploymentTargetClaim, named []appstudiov1alpha1.DeploymentTarget) (reason, message string) {
	for i := range named {
		t := &named[i]
		if released(t) || t.Spec.DeploymentTargetClassName == c.Spec.DeploymentTargetClassName {
			continue
		}
		if provisionedUnderOtherClass(c, t) {
			return BindReasonProvisionedUnderOtherClass, provisionedUnderOtherClassMessage(c, t)
		}
		return appstudiov1alpha1.BindReasonClassMismatch, fmt.Sprintf("target %s names this claim but is of class %q, not %q; it is never bound",
			t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName)
	}
	return "", ""
}

// releasedNote tells, in a Pending claim's message, that a Released target
// still names the claim and was passed over; "" when none does.
func releasedNote(named []appstudiov1alpha1.DeploymentTarget) string {
	for i := range named {
		if released(&named[i]) {
			return fmt.Sprintf(" (target %s names this claim but was Released by an earlier claim of this name; a Released target is not bound again until an operator sets its phase to Available)", named[i].Name)
		}
	}
	return ""
}

func released(t *appstudiov1alpha1.DeploymentTarget) bool {
	return t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseReleased
}

// targetNameConflict reports a claim whose spec.targetName names another
// target than held, the one it holds. A bound claim stays Bound (as after a
// class change: whoever uses it keeps its environment), its Bound condition
// True with reason TargetNameConflict (a Warning Event); a claim not bound
// yet stays Pending with that reason.
//
// Deleting the claim applies held's reclaimPolicy only if the claim holds it
// by a durable fact (binding.HeldByFact); a target that only names the claim
// (pre-bound by a user) is left as it is, and the message says which.
func (r *Reconciler) targetNameConflict(s *scope, held *appstudiov1alpha1.DeploymentTarget, name string) {
	msg := fmt.Sprintf("spec.targetName is %s, but target %s is bound to this claim; a claim binds one target, so target %s is not bound: "+
		"set spec.targetName back to %s, or delete the claim (target %s's reclaimPolicy applies) and create one for %s",
		name, held.Name, name, held.Name, held.Name, name)
	if !binding.HeldByFact(s.claim, held) {
		msg = fmt.Sprintf("spec.targetName is %s, but target %s names this claim in its spec.claimRef; a claim binds one target, so neither is bound: "+
			"set spec.targetName to %s, or clear target %s's spec.claimRef, or delete the claim (target %s, which this claim never bound, is left as it is, still naming it)",
			name, held.Name, held.Name, held.Name, held.Name)
	}
	if !binding.BindComplete(s.claim) {
		s.pending(appstudiov1alpha1.BindReasonTargetNameConflict, msg)
		return
	}
	r.follow(s, held)
	if s.claim.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonTargetNameConflict, msg)
	}
}
