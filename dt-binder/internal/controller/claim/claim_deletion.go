package claim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/text"
)

// reclaim is the claim side of deletion (seed 004 steps 1, 2, 7 and rule C):
// with reclaimPolicy Delete the bound target is deleted and the finalizer goes
// once it is gone; with Retain the target's claimRef is cleared (the target
// reports Released) and the finalizer goes at once. The policy is that of
// the target's class, the class it was bound under: after a class change of
// the claim (ClassChanged) the claim's new class says nothing about a target
// it never provisioned. A target whose class is missing is kept (Retain):
// deleting what no policy asked to delete is the one mistake that cannot be
// undone; the claim still goes.
//
// The policy applies only to a target the claim holds by a durable fact
// (binding.ReclaimedTarget: it records this claim object, or the claim is
// bind-complete). A target that only names the claim (a user pre-bound it,
// and the claim named another in spec.targetName, or was deleted before it
// bound it) is left as it is, reserved for the claim's name, as a pre-bound
// PersistentVolume whose claimRef has no UID is never reclaimed.
func (r *Reconciler) reclaim(ctx context.Context, s *scope) (flow.Result, error) {
	t := binding.ReclaimedTarget(s.claim, s.named)
	if t == nil {
		if named := binding.HeldTarget(s.claim, s.named); named != nil {
			s.log.Info("leaving a target that names the claim but was never bound by it", "target", named.Name)
			r.removeFinalizer(s, fmt.Sprintf("target %s names this claim but was never bound by it; it is left as it is", named.Name))
			return flow.Continue(), nil
		}
		r.removeFinalizer(s, "no target is bound")
		return flow.Continue(), nil
	}
	policy, className, err := r.reclaimPolicy(ctx, s, t)
	if err != nil {
		return flow.Continue(), err
	}
	if policy == appstudiov1alpha1.ReclaimPolicyRetain {
		return flow.Continue(), r.retainTarget(ctx, s, t, className)
	}
	return flow.Continue(), r.deleteBoundTarget(ctx, s, t, className)
}

// retainTarget releases the claim's target (reclaimPolicy Retain) and lets
// the claim go. A never-bound target whose SpaceRequest is going is left to
// its provisioner: it is not offered to the next claim, its namespace is going.
func (r *Reconciler) retainTarget(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget, className string) error {
	// The API server, not the cache (see releaseEarlier); only on the
	// deletion of a claim under Retain.
	late, err := reclaim.LateTarget(ctx, r.APIReader, t)
	if err != nil {
		return err
	}
	if late {
		s.log.Info("not releasing a never-bound target whose SpaceRequest is going; its provisioner deletes it", "target", t.Name)
		r.removeFinalizer(s, fmt.Sprintf("target %s was never bound and its SpaceRequest is being deleted; its provisioner deletes it", t.Name))
		return nil
	}
	if t.Spec.ClaimRef != nil && t.DeletionTimestamp == nil {
		if err := r.releaseTarget(ctx, t); err != nil {
			return err
		}
		s.log.Info("released target (reclaimPolicy Retain)", "target", t.Name, "class", className)
		r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventTargetRetained, "Reclaim",
			"Released target %s and kept it (class %s, reclaimPolicy Retain)", t.Name, className)
	}
	r.removeFinalizer(s, "target retained")
	return nil
}

// deleteBoundTarget deletes the claim's target (reclaimPolicy Delete). The
// finalizer goes when the target is gone (step 7); its delete event brings
// the claim back.
func (r *Reconciler) deleteBoundTarget(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget, className string) error {
	if t.DeletionTimestamp == nil {
		if err := r.deleteTarget(ctx, t); err != nil {
			return err
		}
		s.log.Info("deleting target (reclaimPolicy Delete)", "target", t.Name, "class", className)
		r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventDeletingTarget, "Reclaim",
			"Deleting target %s (class %s, reclaimPolicy Delete)", t.Name, className)
	}
	s.setCondition(metav1.ConditionFalse, appstudiov1alpha1.BindReasonDeletingTarget, deletingTargetMessage(t))
	return nil
}

// maxQuotedTargetMessage bounds what deletingTargetMessage quotes of a
// failed target's Ready message, which quotes its SpaceRequest's in turn.
const maxQuotedTargetMessage = 1024

// deletingTargetMessage says what a deleted claim waits for: its target to
// go. A target Failed while being deleted (its SpaceRequest could not be
// terminated) goes only once that is dealt with, so the message says so,
// why (the target's Ready condition, from the cached copy: no request), and
// where to look further.
func deletingTargetMessage(t *appstudiov1alpha1.DeploymentTarget) string {
	msg := fmt.Sprintf("waiting for target %s to be deleted (reclaimPolicy Delete)", t.Name)
	if t.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseFailed {
		return msg
	}
	msg += fmt.Sprintf("; the target's phase is %s", t.Status.Phase)
	if c := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.TargetConditionReady); c != nil && c.Message != "" {
		msg += fmt.Sprintf(" (%s: %s)", c.Reason, text.Shorten(c.Message, maxQuotedTargetMessage))
	}
	return msg + fmt.Sprintf("; see its status and events: kubectl describe deploymenttarget %s -n %s", t.Name, t.Namespace)
}

// releaseTarget clears t's claimRef (reclaim.Release).
func (r *Reconciler) releaseTarget(ctx context.Context, t *appstudiov1alpha1.DeploymentTarget) error {
	_, err := reclaim.Release(ctx, r.Client, observability.KindClaim, t)
	return err
}

// deleteTarget deletes t, preconditioned on its UID (reclaim.Delete).
func (r *Reconciler) deleteTarget(ctx context.Context, t *appstudiov1alpha1.DeploymentTarget) error {
	return reclaim.Delete(ctx, r.Client, observability.KindClaim, t)
}
