package spacerequest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// patchFinalizers writes a finalizer change, failing on a concurrent change
// of the object so that no other writer's finalizer is lost; the patcher
// records the version it replaced (the stale guard).
// The write is the child span "SpaceRequest.<step>".
func (r *Reconciler) patchFinalizers(ctx context.Context, s *scope, step string, mutate func(client.Object) bool) error {
	base := s.sr.DeepCopy()
	if !mutate(s.sr) {
		return nil
	}
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step)
	err := s.patcher.Track(s.sr, func() error {
		return r.Client.Patch(ctx, s.sr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	tracing.EndStep(span, client.IgnoreNotFound(err))
	return err
}

func (r *Reconciler) addFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	err := r.patchFinalizers(ctx, s, "AddFinalizer", func(o client.Object) bool {
		return controllerutil.AddFinalizer(o, toolchainv1alpha1.Finalizer)
	})
	if err != nil {
		return flow.Continue(), fmt.Errorf("adding finalizer: %w", err)
	}
	return flow.Continue(), nil
}

func (r *Reconciler) checkFinalizerPresent(_ context.Context, s *scope) (flow.Result, error) {
	if !controllerutil.ContainsFinalizer(s.sr, toolchainv1alpha1.Finalizer) {
		// Not (or no longer) the stub's to clean up.
		s.patcher.Skip()
		return flow.Stop(), nil
	}
	return flow.Continue(), nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	err := r.patchFinalizers(ctx, s, "RemoveFinalizer", func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, toolchainv1alpha1.Finalizer)
	})
	if client.IgnoreNotFound(err) != nil {
		return flow.Continue(), fmt.Errorf("removing finalizer: %w", err)
	}
	s.patcher.Skip()
	s.gone = true
	ctrl.LoggerFrom(ctx).Info("terminated", "namespace", NamespaceName(s.sr))
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventTerminated, "Terminate",
		"Namespace %s is gone; released the SpaceRequest", NamespaceName(s.sr))
	return flow.Continue(), nil
}
