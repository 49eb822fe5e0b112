package target

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// patchFinalizers writes a finalizer change, failing on a concurrent change
// so that no other writer's finalizer is lost (a conflict: the reconcile
// runs again on the newer copy, see flow.Outcomes).
func (r *Reconciler) patchFinalizers(ctx context.Context, dt *appstudiov1alpha1.DeploymentTarget, mutate func(client.Object) bool) error {
	base := dt.DeepCopy()
	if !mutate(dt) {
		return nil
	}
	return r.Client.Patch(ctx, dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	if !sandbox.ProvisionedBySandbox(s.dt) {
		return flow.Continue(), nil // it carries the finalizer (ours); nothing to add
	}
	if err := r.patchFinalizers(ctx, s.dt, func(o client.Object) bool {
		return controllerutil.AddFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}); err != nil {
		return flow.Continue(), fmt.Errorf("adding finalizer: %w", err)
	}
	return flow.Continue(), nil
}

// checkFinalizerPresent stops when the finalizer is gone: nothing is left to release.
func (r *Reconciler) checkFinalizerPresent(_ context.Context, s *scope) (flow.Result, error) {
	if !controllerutil.ContainsFinalizer(s.dt, appstudiov1alpha1.TargetFinalizer) {
		return flow.Stop(), nil
	}
	return flow.Continue(), nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindTarget, "RemoveFinalizer")
	err := client.IgnoreNotFound(r.patchFinalizers(spanCtx, s.dt, func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("removing finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("released target: its SpaceRequest is gone")
	r.Recorder.Eventf(s.dt, nil, corev1.EventTypeNormal, EventDeprovisioned, "Deprovision",
		"SpaceRequest %s is gone; removed finalizer %s, so the target's deletion completes", spaceRequestName(s.dt), appstudiov1alpha1.TargetFinalizer)
	return flow.Continue(), nil
}
