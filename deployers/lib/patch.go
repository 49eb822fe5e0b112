package lib

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/status"
)

// newPatcher snapshots di's status for the reconcile's one status write: a
// JSON merge patch of the changed status fields with field manager
// Options.Name, so fields other controllers own (status.jobID of the
// execution controller) are never rewritten from a stale copy. It is guarded
// by the resourceVersion read: the execution controller fails items too
// (timeouts, interrupt; also guarded), so a status computed from a copy that
// is not current must not overwrite its write (nor may a stale copy start a
// job twice).
func (r *Reconciler) newPatcher(di *lsv1alpha1.DeployItem) (*status.Patcher, error) {
	p, err := status.NewPatcher(r.client, di, status.FieldOwner(r.opts.Name), status.RecordWrites(&r.ownWrites))
	if err != nil {
		return nil, err
	}
	p.Guard()
	return p, nil
}

// writeItem writes what the reconcile changed, once, at its end (deferred
// by Reconcile): nothing before the Patcher exists (responsibility not
// established) or after an earlier write of the reconcile failed. A
// conflict is a lost race: the watch brings the item back.
func (r *Reconciler) writeItem(ctx context.Context, s *scope, res *reconcile.Result, retErr *error) {
	if s.patcher == nil || s.patcher.Failed() {
		return
	}
	if err := r.patch(ctx, s); err != nil {
		s.discard = true
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			s.log.V(1).Info("deploy item changed while reconciling; retrying", "error", err.Error())
			*res = extension.MinRequeue(*res, reconcile.Result{RequeueAfter: minBackoff})
			return
		}
		*retErr = errors.Join(*retErr, err)
		return
	}
	if s.removeFinalizer {
		r.forget(s.req.NamespacedName)
		return
	}
	r.metrics.Phase(s.orig.Namespace, s.orig.Name, string(s.item.Status.Phase))
}

// patch writes first the status, then the metadata not written yet
// (patchMetadata; a job that starts on an item without the finalizer wrote
// it before the work, see ensureFinalizer). The status write precedes the
// metadata write, so a crash in between never loses a started job.
func (r *Reconciler) patch(ctx context.Context, s *scope) error {
	latest, err := r.patchStatus(ctx, s)
	if err != nil {
		return err
	}
	_, err = r.patchMetadata(ctx, s, latest)
	return err
}

// patchStatus writes the status the reconcile computed (no request when it
// is unchanged) and returns the item as written. On a conflict the job's
// outcome is dropped (the next reconcile computes it from the current
// item), but not the record of what the deployer did to the target: see
// keepRecord.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) (*lsv1alpha1.DeployItem, error) {
	obj := s.orig.DeepCopy()
	obj.Status = s.item.Status
	// The record of what is installed that this write carries: kept apart,
	// since a failed write may leave obj in any state.
	rec := recordOf(obj)
	err := s.patcher.Patch(ctx, obj)
	if apierrors.IsInvalid(err) {
		// The API server refuses the status (e.g. a provider status the
		// schema rejects). Retrying would only repeat that: end the job
		// Failed with the refusal as lastError, keeping the old provider status.
		s.log.Error(err, "status refused by the API server; failing the job")
		obj = r.refusedStatus(s, err)
		rec = recordOf(obj)
		var p *status.Patcher
		if p, err = r.newPatcher(s.orig); err == nil {
			err = p.Patch(ctx, obj)
		}
	}
	if apierrors.IsConflict(err) {
		if rv := r.keepRecord(ctx, s, rec); rv != "" {
			r.ownWrites.Replaced(client.ObjectKeyFromObject(s.orig), rv)
		}
	}
	if err != nil {
		return nil, err
	}
	if s.orig.Status.Phase != s.item.Status.Phase {
		s.log.Info("phase changed", "from", s.orig.Status.Phase, "to", s.item.Status.Phase, "jobID", s.item.Status.JobID, "jobIDFinished", s.item.Status.JobIDFinished)
	}
	return obj, nil
}

// refusedStatus is the status that ends the job Failed after the API server
// refused the computed one (err): the computed status with the provider
// status and export reference as read, and lastError StatusWriteFailed.
func (r *Reconciler) refusedStatus(s *scope, err error) *lsv1alpha1.DeployItem {
	obj := s.orig.DeepCopy()
	obj.Status = *s.item.Status.DeepCopy()
	obj.Status.ProviderStatus = s.orig.Status.ProviderStatus
	obj.Status.ExportReference = s.orig.Status.ExportReference
	obj.Status.Phase = lsv1alpha1.PhaseFailed
	obj.Status.JobIDFinished = obj.Status.JobID
	now := metav1.NewTime(r.now())
	obj.Status.LastError = &lsv1alpha1.Error{
		Operation: OperationReconcile, Reason: ReasonStatusWriteFailed,
		Message: statusMessage("the API server refused the deploy item's status: " + err.Error()),
		Codes:   []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}, LastTransitionTime: now, LastUpdateTime: now,
	}
	r.event(s, corev1.EventTypeWarning, ReasonStatusWriteFailed, "%s", obj.Status.LastError.Message)
	return obj
}

// persistMetadata writes the metadata changes collected so far ahead of the
// status (see ensureFinalizer); the reconcile goes on from the written item,
// with the status it computed.
func (r *Reconciler) persistMetadata(ctx context.Context, s *scope) error {
	obj, err := r.patchMetadata(ctx, s, s.orig)
	if err != nil {
		return err
	}
	s.orig = obj
	s.item.ObjectMeta = *obj.ObjectMeta.DeepCopy()
	s.removeAnnotations, s.setAnnotations, s.addFinalizer = nil, nil, false
	return nil
}

// patchMetadata writes the metadata changes the reconcile collected
// (annotation removals, the trace context of a job the deployer starts
// itself, the finalizer) on top of latest, and returns the item as written.
func (r *Reconciler) patchMetadata(ctx context.Context, s *scope, latest *lsv1alpha1.DeployItem) (*lsv1alpha1.DeployItem, error) {
	base := latest.DeepCopy()
	obj := latest.DeepCopy()
	if !applyMetadata(s, obj) {
		return latest, nil
	}
	// Always with a resourceVersion precondition: a merge patch replaces the
	// whole finalizer list, and removing an annotation must not remove a value
	// somebody wrote after our read (a new operation: reconcile replacing the
	// force-reconcile we are done with). A conflict requeues the item, and
	// the next reconcile sees the new value.
	p := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := s.patcher.Track(obj, func() error {
		return r.client.Patch(ctx, obj, p, client.FieldOwner(r.opts.Name))
	}); err != nil {
		return nil, fmt.Errorf("writing metadata of deploy item: %w", err)
	}
	return obj, nil
}

// applyMetadata applies the collected metadata changes to obj and reports
// whether anything changed.
func applyMetadata(s *scope, obj *lsv1alpha1.DeployItem) bool {
	changed := false
	for _, k := range slices.Compact(slices.Sorted(slices.Values(s.removeAnnotations))) {
		if _, ok := obj.Annotations[k]; ok {
			delete(obj.Annotations, k)
			changed = true
		}
	}
	for k, v := range s.setAnnotations {
		if cur, ok := obj.Annotations[k]; !ok || cur != v {
			if obj.Annotations == nil {
				obj.Annotations = map[string]string{}
			}
			obj.Annotations[k] = v
			changed = true
		}
	}
	if s.addFinalizer && obj.DeletionTimestamp == nil {
		changed = controllerutil.AddFinalizer(obj, lsv1alpha1.Finalizer) || changed
	}
	if s.removeFinalizer {
		changed = controllerutil.RemoveFinalizer(obj, lsv1alpha1.Finalizer) || changed
	}
	return changed
}
