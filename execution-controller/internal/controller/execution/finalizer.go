package execution

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// ensureFinalizer keeps the execution until its items are gone. The patch
// carries the resourceVersion, so it cannot drop a finalizer someone else
// added meanwhile.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	if s.exec.DeletionTimestamp != nil || controllerutil.ContainsFinalizer(s.exec, lsv1alpha1.Finalizer) {
		return flow.Continue(), nil
	}
	base := s.exec.DeepCopy()
	controllerutil.AddFinalizer(s.exec, lsv1alpha1.Finalizer)
	if err := s.status.Track(s.exec, func() error {
		return r.Client.Patch(ctx, s.exec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
			client.FieldOwner(r.FieldManager))
	}); err != nil {
		return flow.Continue(), fmt.Errorf("adding finalizer: %w", err)
	}
	// The patch response carries the server's status; keep ours.
	s.exec.Status = *base.Status.DeepCopy()
	return flow.Continue(), nil
}

// removeFinalizer lets the execution go once its items are gone: its
// status is not written any more.
func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) error {
	base := s.exec.DeepCopy()
	controllerutil.RemoveFinalizer(s.exec, lsv1alpha1.Finalizer)
	if err := s.status.Track(s.exec, func() error {
		return r.Client.Patch(ctx, s.exec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
			client.FieldOwner(r.FieldManager))
	}); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	s.gone = true
	s.status.Skip()
	st := &s.exec.Status
	if jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		r.metrics.JobFinished(ReasonDeleted, r.clock.Finish(client.ObjectKeyFromObject(s.exec), st.JobID, jobStartTime(st), r.Now()))
	}
	logf.FromContext(ctx).Info("all deploy items deleted; execution released")
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete", "all deploy items deleted")
	return nil
}
