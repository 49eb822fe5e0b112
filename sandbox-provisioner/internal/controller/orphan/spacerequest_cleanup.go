package orphan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// checkTarget stops if a target was made from the SpaceRequest: then the
// target's deletion deletes it. A target that still names the gone claim and
// was never bound (made in the moment the claim went) is an orphan itself.
// A target made for a claim that lives on but now names another target is
// left alone: the claim still holds it (the binder reports the conflict, and
// the claim's deletion reclaims it); only a SpaceRequest from which no target
// was made is unused for certain.
// It asks the API server, not the cache (this is the rare deletion path):
// a target the provisioner created a moment ago must not be missed. One it
// creates after this read is a late target (reconcileLateTarget).
func (r *Reconciler) checkTarget(ctx context.Context, s *scope) (flow.Result, error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.sr), dt)
	if apierrors.IsNotFound(err) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading DeploymentTarget %s: %w", s.sr.Name, err)
	}
	if s.claim == claimGone && dt.DeletionTimestamp.IsZero() && neverBound(dt) && sandbox.ProvisionedBySandbox(dt) &&
		dt.Spec.ClaimRef != nil && dt.Spec.ClaimRef.Name == appstudiov1alpha1.ClaimOf(s.sr) {
		s.orphanTarget = dt
		return flow.Continue(), nil
	}
	return flow.Stop(), nil
}

// deleteUnusedSpaceRequest deletes a SpaceRequest from which no target was
// made, whatever the class's reclaimPolicy (see the package comment).
func (r *Reconciler) deleteUnusedSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	if s.orphanTarget != nil {
		return flow.Continue(), nil
	}
	className := appstudiov1alpha1.ClassOf(s.sr)
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphan")
	err := client.IgnoreNotFound(r.Client.Delete(spanCtx, s.sr, client.Preconditions{UID: &s.sr.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Stop(), fmt.Errorf("deleting orphaned SpaceRequest %s: %w", s.sr.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted orphaned SpaceRequest: no target was made from it", "class", className, "claimState", s.claim.String())
	what := "is gone"
	if s.claim == claimRedirected {
		what = "names another target in spec.targetName (the binder binds it to that target only)"
	}
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"Claim %s %s and no target was made from this SpaceRequest; deleted it (a reclaimPolicy keeps targets, and this SpaceRequest never backed one)",
		appstudiov1alpha1.ClaimOf(s.sr), what)
	return flow.Stop(), nil
}
