package claim

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// ensureFinalizer adds the binder's finalizer before anything else happens, so
// that a claim is never deleted without its target being dealt with. It is
// written with the reconcile's one metadata patch (with the dt-provisioner
// mark, or the bind annotations), or — should the reconcile write a target's
// claimRef — at once before that write (persistFinalizer).
func (r *Reconciler) ensureFinalizer(_ context.Context, s *scope) (flow.Result, error) {
	if !hasFinalizer(s.claim) {
		s.claim.Finalizers = append(s.claim.Finalizers, appstudiov1alpha1.ClaimFinalizer)
	}
	return flow.Continue(), nil
}

// persistFinalizer writes the finalizer ensureFinalizer added in memory, if
// the claim on the API server does not have it yet: before the binder writes
// anything elsewhere (a target's claimRef) for the claim.
func (r *Reconciler) persistFinalizer(ctx context.Context, s *scope) error {
	if hasFinalizer(s.before) || s.claim.DeletionTimestamp != nil {
		return nil
	}
	base := s.before.DeepCopy()
	s.claim.Finalizers = append(append([]string(nil), base.Finalizers...), appstudiov1alpha1.ClaimFinalizer)
	s.claim.Annotations = base.DeepCopy().Annotations
	// The binder's first write on a claim starts the claim's trace for every
	// controller that follows (no-op with tracing off).
	s.claim.Annotations = tracing.InjectOnce(ctx, s.claim.Annotations)
	desired := s.claim.Status.DeepCopy()
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "AddFinalizer")
	err := s.patcher.Track(s.claim, func() error {
		return r.Client.Patch(spanCtx, s.claim, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	s.claim.Status = *desired
	s.before = s.claim.DeepCopy()
	s.before.Status = base.Status
	return nil
}

// requireFinalizer stops deletion handling of claims without the binder's
// finalizer: nothing waits for the binder there.
func (r *Reconciler) requireFinalizer(_ context.Context, s *scope) (flow.Result, error) {
	if !hasFinalizer(s.claim) {
		return flow.Stop(), nil
	}
	return flow.Continue(), nil
}

// removeFinalizer lets the deleted claim go, with an Event saying why.
func (r *Reconciler) removeFinalizer(s *scope, why string) {
	s.claim.Finalizers = slices.DeleteFunc(slices.Clone(s.claim.Finalizers), func(f string) bool { return f == appstudiov1alpha1.ClaimFinalizer })
	s.log.Info("removing finalizer", "why", why)
	r.Recorder.Eventf(s.claim, nil, corev1EventNormal, EventFinalized, "Reclaim", "Removed finalizer: %s", why)
}

func hasFinalizer(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return slices.Contains(c.Finalizers, appstudiov1alpha1.ClaimFinalizer)
}
