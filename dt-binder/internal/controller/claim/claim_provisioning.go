package claim

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
)

// BindReasonProvisionedUnderOtherClass (claim, Bound condition, phase
// Pending): a target was provisioned for the claim under the class it had
// when it was marked for provisioning, and the claim's class has been changed
// since; that target is never bound to it, and nothing is provisioned for the
// new class while it names the claim. (In this package until the API's
// constants, another module, take it.)
const BindReasonProvisionedUnderOtherClass = "ProvisionedUnderOtherClass"

// markForProvisioning marks the claim for dynamic provisioning by its class's
// provisioner (the dt-provisioner annotation, written with the reconcile's
// one metadata patch): no free target of its class exists.
func markForProvisioning(s *scope) {
	c := s.claim
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] = s.class.Spec.Provisioner
	s.pending(appstudiov1alpha1.BindReasonProvisioning, provisioningMessage(c, s.class.Spec.Provisioner, s.named))
}

// awaitProvisioner keeps a claim marked for provisioner p Pending,
// Provisioning. Once marked, the claim waits for its provisioner only:
// binding it to another free target now would orphan what the provisioner
// creates.
func (r *Reconciler) awaitProvisioner(s *scope, p string) {
	c := s.claim
	if want := s.class.Spec.Provisioner; p != want {
		// Marked under the class the claim had before (the mark is written
		// once); the provisioner acts on the mark alone, so a stale one has
		// the wrong provisioner provision, or none ever. Unbound, with no
		// target provisioned for it (one naming it would have been
		// followed, or refused by whyNotEligible): mark it for the current
		// class's provisioner, in this reconcile's one metadata write.
		c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] = want
		s.log.Info("class changed while waiting for provisioning; marked for the new class's provisioner", "was", p, "provisioner", want)
		r.Recorder.Eventf(c, nil, corev1EventNormal, EventProvisionerChanged, "Bind",
			"spec.deploymentTargetClassName is now %q, whose provisioner is %s; marked the claim for provisioning by %s instead of %s",
			c.Spec.DeploymentTargetClassName, want, want, p)
		p = want
	}
	s.pending(appstudiov1alpha1.BindReasonProvisioning, provisioningMessage(c, p, s.named))
}

// provisioningMessage is the Bound condition's message while a claim waits
// for its provisioner: the same when the claim is marked and on every
// reconcile after, so the wait costs one status write.
func provisioningMessage(c *appstudiov1alpha1.DeploymentTargetClaim, provisioner string, named []appstudiov1alpha1.DeploymentTarget) string {
	return fmt.Sprintf("no free target of class %s; waiting for provisioner %s to create one", c.Spec.DeploymentTargetClassName, provisioner) +
		releasedNote(named)
}

// provisioning: the claim is Pending for dynamic provisioning (marked, and
// its Bound condition says Provisioning).
func provisioning(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound)
	return c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] != "" &&
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhasePending &&
		cond != nil && cond.Reason == appstudiov1alpha1.BindReasonProvisioning &&
		cond.ObservedGeneration == c.Generation
}

// provisionedUnderOtherClass: t, of another class than the claim's, was
// provisioned for this claim under the class it had when it was marked; the
// class was changed after that.
func provisionedUnderOtherClass(c *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) bool {
	return c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] != "" &&
		t.Annotations[appstudiov1alpha1.ProvisionedByAnnotation] != "" && binding.RecordedClaimUID(t) == string(c.UID)
}

func provisionedUnderOtherClassMessage(c *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) string {
	return fmt.Sprintf(
		"target %s was provisioned for this claim (by %s) under class %q, and spec.deploymentTargetClassName was changed to %q since: "+
			"it is never bound to this claim, and nothing is provisioned for class %q while it names this claim. "+
			"Set the class back to %q, or delete target %s (the claim is then marked for class %q's provisioner), or delete the claim",
		t.Name, c.Annotations[appstudiov1alpha1.ProvisionerAnnotation], t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName,
		c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName, t.Name, c.Spec.DeploymentTargetClassName)
}
