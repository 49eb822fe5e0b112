package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
)

// bindStatic binds to the target the user named in spec.targetName, and to no
// other: a target of another class or claimed by another claim is refused.
// A claim that has bound before and holds nothing now is Lost; it claims the
// named target only if the user, not the binder, set spec.targetName.
func (r *Reconciler) bindStatic(ctx context.Context, s *scope) error {
	c := s.claim
	name := c.Spec.TargetName
	if held := binding.HeldTarget(c, s.named); held != nil && held.Name != name && binding.BindComplete(c) {
		// spec.targetName was changed after the claim bound another
		// target. Checked before anything about the named target (missing,
		// of another class, claimed by another claim): those say nothing
		// about this claim, which keeps what it holds. Claiming the named
		// target too would bind two targets to one claim (and leave the
		// first claimed for ever); its reclaim policy applies when the
		// claim goes.
		r.targetNameConflict(s, held, name)
		return nil
	}
	t := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, t); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting target %s: %w", name, err)
		}
		s.lostOrPending(fmt.Sprintf("target %s was deleted", name),
			appstudiov1alpha1.BindReasonTargetNotFound, fmt.Sprintf("target %s does not exist", name))
		return nil
	}
	if wasBound(c) && boundByController(c) && !binding.NamesClaim(t, c) {
		s.lostToNamesake(name)
		return nil
	}
	if decided, err := r.namedTargetTaken(ctx, s, t); decided || err != nil {
		return err
	}
	if held := binding.HeldTarget(c, s.named); held != nil && held.Name != name {
		// Not bound yet, but another target of its class names the claim
		// (pre-bound, or being bound): claiming this one too would bind
		// two targets to one claim.
		r.targetNameConflict(s, held, name)
		return nil
	}
	if why := binding.Unavailable(t); why != "" {
		s.lostOrPending(fmt.Sprintf("target %s was released: %s", name, why),
			appstudiov1alpha1.BindReasonTargetNotAvailable, fmt.Sprintf("target %s cannot be bound: %s", name, why))
		return nil
	}
	if err := r.claimTarget(ctx, s, t); err != nil {
		return err
	}
	s.pending(appstudiov1alpha1.BindReasonWaitingForTarget, fmt.Sprintf("claimed target %s; waiting for it to report Bound", name))
	return nil
}

// namedTargetTaken decides the claim's state when the named target t is not
// free for it: of another class, kept for an earlier claim of this name,
// Released, already naming this claim (followed), or claimed by another. It
// reports whether it decided.
func (r *Reconciler) namedTargetTaken(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) (bool, error) {
	c, name := s.claim, t.Name
	switch {
	case t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName:
		s.pending(appstudiov1alpha1.BindReasonClassMismatch,
			fmt.Sprintf("target %s is of class %q, not %q; it is never bound", name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName))
	case binding.ForEarlierClaim(t, c):
		// Bound for an earlier claim of this name, which is gone;
		// reclaimEarlier applied its class's reclaimPolicy in this
		// reconcile, and the target's next event brings the claim back.
		s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable,
			fmt.Sprintf("target %s was bound to an earlier claim of this name (UID %s), which is gone; its class's reclaimPolicy is applied for that claim, and this claim does not inherit it",
				name, binding.RecordedClaimUID(t)))
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == c.Name && released(t):
		// Left Released, still naming this claim's name, by an earlier claim
		// (its finalizer was removed by force): this claim did not bind it,
		// and a Released target is never bound again automatically.
		s.lostOrPending(fmt.Sprintf("target %s was released", name), appstudiov1alpha1.BindReasonTargetNotAvailable,
			fmt.Sprintf("target %s names this claim but was Released by an earlier claim of this name; it is not bound again until an operator sets its phase to Available", name))
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == c.Name:
		if wrote, err := r.recordClaim(ctx, s, t); wrote || err != nil {
			return true, err
		}
		r.follow(s, t)
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name != "":
		s.pending(appstudiov1alpha1.BindReasonTargetClaimedByOther,
			fmt.Sprintf("target %s is claimed by %q; it is never bound", name, t.Spec.ClaimRef.Name))
	default:
		return false, nil
	}
	return true, nil
}
