package orphan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// reconcileLateTarget deletes a target made from the SpaceRequest key (being
// deleted, or gone) for a claim that is gone, and never bound: a provisioner
// whose cache still showed the claim and the SpaceRequest created it after
// this reconciler had deleted the SpaceRequest (see the package comment).
// Only the cache is read until such a target is found (the normal path, a
// target of a live claim, or one being deleted, costs no request); then the
// API server confirms the claim is gone and the target never bound.
func (r *Reconciler) reconcileLateTarget(ctx context.Context, key types.NamespacedName) (_ ctrl.Result, retErr error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, key, dt); err != nil {
		if apierrors.IsNotFound(err) {
			r.outcomes.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !lateTargetCandidate(dt, key.Name) {
		r.outcomes.Forget(key)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindTarget, dt, "")
	defer func() { tracing.EndReconcile(span, "", retErr) }()
	// Reported on the target: the SpaceRequest may be gone.
	return r.outcomes.Finish(ctx, key, flow.Continue(), r.deleteLateTarget(ctx, key, dt), func(err error) {
		r.Recorder.Eventf(dt, nil, corev1.EventTypeWarning, EventOrphanCleanupFailed, "Reclaim", "%v", err)
	})
}

// deleteLateTarget deletes dt, a late target candidate of the SpaceRequest
// key in the cache, once the API server confirms it.
func (r *Reconciler) deleteLateTarget(ctx context.Context, key types.NamespacedName, dt *appstudiov1alpha1.DeploymentTarget) error {
	claim := claimName(dt)
	log := ctrl.LoggerFrom(ctx).WithValues("target", dt.Name, "claim", claim)
	use := claimGone
	for _, reader := range []client.Reader{r.Client, r.APIReader} {
		if claim == "" {
			break // released: no claim holds it
		}
		var err error
		if use, err = claimUseOf(ctx, reader, dt.Namespace, claim, dt.Name); err != nil || use == claimUses {
			return err
		}
	}
	// Confirm the target itself: still never bound, and delete exactly the
	// version looked at.
	if err := r.APIReader.Get(ctx, key, dt); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !lateTargetCandidate(dt, key.Name) {
		return nil
	}
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphanTarget")
	err := client.IgnoreNotFound(r.Client.Delete(spanCtx, dt, client.Preconditions{UID: &dt.UID, ResourceVersion: &dt.ResourceVersion}))
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("deleting DeploymentTarget %s made from a deleted SpaceRequest: %w", dt.Name, err)
	}
	log.Info("deleted a target made from a SpaceRequest that was deleted as an orphan: its claim does not use it and it was never bound", "claimState", use.String())
	// On the target: the SpaceRequest may be gone.
	what := fmt.Sprintf("Claim %s is gone and this target", claim)
	switch {
	case claim == "":
		what = "This target, released,"
	case use == claimRedirected:
		what = fmt.Sprintf("Claim %s names another target in spec.targetName and this target", claim)
	}
	r.Recorder.Eventf(dt, nil, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"%s, never bound, was made from SpaceRequest %s, which is being deleted (or gone) as an orphan; "+
			"deleted it whatever the class's reclaimPolicy: the namespace it points to is being deleted", what, key.Name)
	return nil
}

// lateTargetCandidate: dt was made by this provisioner from the SpaceRequest
// named srName, is not being deleted, and never bound. It names a claim, or
// none because a binder released it (reclaimPolicy Retain) before it saw the
// SpaceRequest going (reclaim.LateTarget in dt-binder); either way nothing
// uses it, and a released one would be offered to the next claim.
func lateTargetCandidate(dt *appstudiov1alpha1.DeploymentTarget, srName string) bool {
	return dt.DeletionTimestamp.IsZero() && sandbox.ProvisionedBySandbox(dt) &&
		dt.Annotations[appstudiov1alpha1.SpaceRequestAnnotation] == srName && neverBound(dt)
}

// claimName is the claim dt's claimRef names ("" when it has none).
func claimName(dt *appstudiov1alpha1.DeploymentTarget) string {
	if dt.Spec.ClaimRef == nil {
		return ""
	}
	return dt.Spec.ClaimRef.Name
}

func neverBound(dt *appstudiov1alpha1.DeploymentTarget) bool {
	return dt.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseBound && dt.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseReleased
}
