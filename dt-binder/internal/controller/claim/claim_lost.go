package claim

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

// wasBound: the claim has been bound before. Such a claim never looks for a
// new target; if its target goes, it is Lost (seed 004, rule B).
func wasBound(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] == appstudiov1alpha1.AnnotationTrue ||
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound ||
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseLost
}

// boundByController: the binder, not the user, set the claim's
// spec.targetName, to the target it bound (best match, a provisioned target,
// or one pre-bound to the claim).
func boundByController(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.Annotations[appstudiov1alpha1.BoundByControllerAnnotation] == appstudiov1alpha1.AnnotationTrue
}

// lost makes the claim Lost: it was bound, and its target is gone.
func (s *scope) lost(message string) {
	s.claim.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhaseLost
	s.setCondition(metav1.ConditionFalse, appstudiov1alpha1.BindReasonTargetLost, message)
}

// lostOrPending: the target the claim names cannot be bound. A claim that was
// bound is Lost (lostMessage); one that never was is Pending.
func (s *scope) lostOrPending(lostMessage, reason, pendingMessage string) {
	if wasBound(s.claim) {
		s.lost(lostMessage)
		return
	}
	s.pending(reason, pendingMessage)
}

// lostToNamesake: the binder wrote spec.targetName, naming the target the
// claim bound, which has gone (or let go of it); the target of that name now
// is another, or the same one freed. A claim whose target is gone never looks
// for another (rule B): taking this one would bind the claim, quietly, to
// whatever was created under the old name. A name the user set is the user's
// choice, and binds the target of that name that exists now.
func (s *scope) lostToNamesake(name string) {
	s.lost(fmt.Sprintf("target %s, which this claim was bound to, is gone or no longer names it; a claim whose target is gone does not bind another, "+
		"even one of the same name (spec.targetName was set by the binder): create a new claim", name))
}
