package orphan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// reclaimOrphanTarget applies the reclaimPolicy of the target's class to a
// target made from the SpaceRequest for the claim that is gone, never bound:
// Delete deletes it (and so the SpaceRequest); Retain, or a class that no
// longer exists, keeps both.
func (r *Reconciler) reclaimOrphanTarget(ctx context.Context, s *scope) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	dt := s.orphanTarget
	className := orphanTargetClass(dt, s.sr)
	policy := appstudiov1alpha1.ReclaimPolicyDelete
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: className}, class)
	classGone := false
	switch {
	case className == "" || apierrors.IsNotFound(err):
		policy, classGone = appstudiov1alpha1.ReclaimPolicyRetain, true
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading DeploymentTargetClass %s: %w", className, err)
	case class.Spec.ReclaimPolicy != "":
		policy = class.Spec.ReclaimPolicy
	}

	if policy != appstudiov1alpha1.ReclaimPolicyDelete {
		why := fmt.Sprintf("class %s has reclaimPolicy %s", className, policy)
		if classGone {
			why = fmt.Sprintf("class %s no longer exists (treated as reclaimPolicy Retain)", className)
		}
		log.Info("keeping a never-bound target made for a claim that is gone", "target", dt.Name, "reclaimPolicy", policy, "classGone", classGone)
		r.Recorder.Eventf(s.sr, dt, corev1.EventTypeNormal, EventOrphanRetained, "Reclaim",
			"Claim %s is gone and target %s made from this SpaceRequest was never bound; kept both because %s",
			appstudiov1alpha1.ClaimOf(s.sr), dt.Name, why)
		return flow.Continue(), nil
	}
	// Deleting the target deletes the SpaceRequest first (package target).
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphanTarget")
	err = client.IgnoreNotFound(r.Client.Delete(spanCtx, dt, client.Preconditions{UID: &dt.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("deleting orphaned DeploymentTarget %s: %w", dt.Name, err)
	}
	log.Info("deleted a target made for a claim that is gone", "target", dt.Name, "class", className)
	r.Recorder.Eventf(s.sr, dt, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"Claim %s went before target %s made from this SpaceRequest was bound; deleted the target (class %s, reclaimPolicy Delete)",
		appstudiov1alpha1.ClaimOf(s.sr), dt.Name, className)
	return flow.Continue(), nil
}

// orphanTargetClass is the class whose reclaimPolicy applies to dt, made from
// sr: the target's own class, as in the dt-binder. The SpaceRequest's class
// label records the claim's class when the SpaceRequest was made; a pending
// claim switched to another class afterwards gets a target of its new class,
// and that class's policy (say Retain) must not be overridden by the old one
// (say Delete). The label is only a fallback for a target naming no class.
func orphanTargetClass(dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) string {
	if dt.Spec.DeploymentTargetClassName != "" {
		return dt.Spec.DeploymentTargetClassName
	}
	return appstudiov1alpha1.ClassOf(sr)
}
