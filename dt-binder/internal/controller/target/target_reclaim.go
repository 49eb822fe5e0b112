package target

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
)

// reclaimGoneClaim applies the reclaimPolicy of the target's class for the
// claim it was bound to (recorded in ClaimAnnotation), which the cache
// does not have: the claim was deleted without its finalizer running (removed
// by hand), so its deletion never reclaimed the target, and no new claim of
// its name has come to do it (the claim reconciler's reclaimEarlier). Left
// alone, the target would stay Released, naming a claim that is gone, for
// ever, and a provisioned target (class Delete) would leak its SpaceRequest
// and namespace. A target without the record (pre-bound by a user to a claim
// that has not bound it yet, or carrying no record) never gets here.
//
// The cache may lag behind the API server, so the claim is confirmed gone
// there first (APIReader; this path is rare, the normal path pays nothing):
// a claim still there with the recorded UID is alive, and the target is left
// as it is (the claim's watch event brings it back once the cache shows the
// claim). A claim of the name with another UID is a new object: the one
// recorded is gone all the same. The policy is then applied by applyPolicy
// (Delete: deleted; Retain: released).
//
// The claim reconciler's reclaimEarlier may apply the same policy to the same
// target at once (a new claim of the name appeared): whichever writes second
// gets a Conflict (retried: the target has moved on) or finds the target
// already deleted; neither is an error.
func (r *Reconciler) reclaimGoneClaim(ctx context.Context, s *scope, wasBound bool) error {
	t := s.target
	name, recorded := t.Spec.ClaimRef.Name, binding.RecordedClaimUID(t)
	live := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, live)
	switch {
	case err == nil && string(live.UID) == recorded:
		s.log.V(1).Info("claim not in the cache yet, but alive on the API server; not reclaiming", "claim", name, "claimUID", recorded)
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("confirming claim %s is gone: %w", name, err)
	}
	gone := fmt.Sprintf("claim %s (UID %s) was deleted without its finalizer running", name, recorded)
	return r.applyPolicy(ctx, s, wasBound, appstudiov1alpha1.TargetReasonClaimNotFound, gone, EventClaimForceDeletedTargetDeleted, EventClaimForceDeletedTargetReleased)
}

// boundElsewhere returns the name of the target claim is bound to when that
// is not t, although t was made or claimed for this claim object (t records
// its UID) and never bound to it; "" otherwise. That is a target the claim
// does not need: typically the one the old class's provisioner made for a
// claim marked again for another class's provisioner (ProvisionerChanged)
// while its SpaceRequest was in flight, after the claim had bound the new
// class's target. Decided from durable facts, as the PersistentVolume
// controller decides it (the claim's volumeName names another volume): the
// claim is bind-complete, its spec.targetName names the other target, which
// is the one it holds; t never reported Bound (a target the claim bound and
// keeps after a spec.targetName change is Bound, and stays the claim's).
func boundElsewhere(claim *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget, named []appstudiov1alpha1.DeploymentTarget) string {
	if claim.DeletionTimestamp != nil || !binding.BindComplete(claim) || binding.RecordedClaimUID(t) != string(claim.UID) ||
		t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound || claim.Spec.TargetName == "" || claim.Spec.TargetName == t.Name {
		return ""
	}
	if held := binding.HeldTarget(claim, named); held != nil && held.Name == claim.Spec.TargetName &&
		held.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound {
		return held.Name
	}
	return ""
}

// reclaimForClaimBoundElsewhere applies the reclaimPolicy of t's class to a
// target its claim does not need (boundElsewhere), as the PersistentVolume
// controller does for a volume provisioned for a claim that got bound to
// another: Delete deletes it (its provisioner then deletes its SpaceRequest),
// Retain clears its claimRef (Available; not a late target, which its
// provisioner deletes). Left naming the claim, it would wait for ever with
// a reason only, and, should the claim's target go, the claim could take
// it, a target it never bound, instead of turning Lost. Rare: it takes a
// class change while a provisioner was at work.
func (r *Reconciler) reclaimForClaimBoundElsewhere(ctx context.Context, s *scope, claim *appstudiov1alpha1.DeploymentTargetClaim, held string) error {
	why := fmt.Sprintf("claim %s (UID %s), for which this target was made or claimed, is bound to target %s; it does not need this one", claim.Name, claim.UID, held)
	return r.applyPolicy(ctx, s, false, appstudiov1alpha1.TargetReasonClaimHasOtherTarget, why, EventClaimBoundElsewhereTargetDeleted, EventClaimBoundElsewhereTargetReleased)
}

// applyPolicy applies the reclaimPolicy of the target's class for a claim
// that does not need the target (why says which, and why), with Event
// deletedEvent or releasedEvent on the target:
//
//   - Delete: the target's status is written first (Released if it was bound,
//     else Pending with pendingReason; the write, preconditioned on the version
//     read, also proves the cached target current), then the target is
//     deleted (UID precondition).
//   - Retain, or a class that does not exist: its claimRef is cleared as on
//     a normal deletion (reclaim.Release, preconditioned on the version
//     read), and it turns Released (Available if it was never bound); a
//     late target (reclaim.LateTarget) is left to its provisioner, Pending
//     with pendingReason.
//
// A write that conflicts (the target changed meanwhile, by reclaimEarlier,
// say) ends the reconcile: the newer version is on its way, and decides again.
func (r *Reconciler) applyPolicy(ctx context.Context, s *scope, wasBound bool, pendingReason, why, deletedEvent, releasedEvent string) error {
	t := s.target
	className := t.Spec.DeploymentTargetClassName
	class, err := reclaim.GetClass(ctx, r.Client, className)
	if err != nil {
		return err
	}
	policy := reclaim.Policy(class)
	if class == nil {
		r.Recorder.Eventf(t, nil, eventWarning, EventClassNotFound, "Reclaim",
			"DeploymentTargetClass %q does not exist; retaining the target: %s", className, why)
	}
	p := reclaimFor{wasBound: wasBound, pendingReason: pendingReason, why: why, className: className,
		log: s.log.WithValues("claim", t.Spec.ClaimRef.Name, "claimUID", binding.RecordedClaimUID(t), "class", className, "reclaimPolicy", policy)}
	if policy == appstudiov1alpha1.ReclaimPolicyRetain {
		return r.releaseFor(ctx, s, p, releasedEvent)
	}
	return r.deleteFor(ctx, s, p, deletedEvent)
}

// reclaimFor is what applyPolicy applies the policy for.
type reclaimFor struct {
	wasBound      bool
	pendingReason string
	why           string
	className     string
	log           logr.Logger
}

// releaseFor clears the target's claimRef (reclaimPolicy Retain), unless it
// is a late target, left to its provisioner.
func (r *Reconciler) releaseFor(ctx context.Context, s *scope, p reclaimFor, event string) error {
	t := s.target
	late, err := reclaim.LateTarget(ctx, r.APIReader, t)
	if err != nil {
		return err
	}
	if late {
		p.log.Info("not releasing a never-bound target whose SpaceRequest is going; its provisioner deletes it")
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, p.pendingReason,
			fmt.Sprintf("%s; this target was never bound and its SpaceRequest %s is being deleted, so it is not released: its provisioner deletes it",
				p.why, t.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]))
		return nil
	}
	old := t.ResourceVersion
	released, err := reclaim.Release(ctx, r.Client, observability.KindTarget, t)
	switch {
	case err != nil:
		return err
	case released == nil:
		s.gone = true // deleted meanwhile: nothing left to report
		return nil
	}
	r.ownWrites.Replaced(client.ObjectKeyFromObject(t), old)
	s.target, s.before = released, released.DeepCopy()
	s.unclaimed(p.wasBound)
	p.log.Info("released target: its claim does not need it", "why", p.why)
	r.Recorder.Eventf(s.target, nil, eventNormal, event, "Reclaim",
		"%s; released this target for it (class %s, reclaimPolicy Retain): claimRef cleared", p.why, p.className)
	return nil
}

// deleteFor writes the target's status, then deletes it (reclaimPolicy
// Delete).
func (r *Reconciler) deleteFor(ctx context.Context, s *scope, p reclaimFor, event string) error {
	t := s.target
	msg := p.why + fmt.Sprintf("; deleting this target (class %s, reclaimPolicy Delete)", p.className)
	if p.wasBound {
		s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased, msg)
	} else {
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, p.pendingReason, msg)
	}
	if err := r.writeStatus(ctx, s); err != nil || s.gone {
		return err
	}
	if err := reclaim.Delete(ctx, r.Client, observability.KindTarget, t); err != nil {
		return err
	}
	p.log.Info("deleting target: its claim does not need it", "why", p.why)
	r.Recorder.Eventf(s.target, nil, eventNormal, event, "Reclaim",
		"%s; deleting this target for it (class %s, reclaimPolicy Delete)", p.why, p.className)
	return nil
}
