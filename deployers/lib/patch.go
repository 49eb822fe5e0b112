package lib

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// patch writes what the reconcile changed: first the status (one merge patch
// with only the changed status fields, guarded by the resourceVersion), then
// the metadata not written yet (patchMetadata; a job that starts on an item
// without the finalizer wrote it before the work, see doReconcile).
func (r *Reconciler) patch(ctx context.Context, s *scope) error {
	owner := client.FieldOwner(r.opts.Name)
	latest := s.orig
	key := client.ObjectKeyFromObject(s.orig)
	replaced := s.replaced
	// The versions the reconcile's writes replaced (all but the newest,
	// which the item has now) are superseded, even when a later write fails.
	defer func() { r.superseded.Replaced(key, replaced...) }()
	if !equality.Semantic.DeepEqual(s.orig.Status, s.item.Status) {
		obj := s.orig.DeepCopy()
		obj.Status = s.item.Status
		// Guarded by the resourceVersion read: the execution controller fails
		// items too (timeouts, interrupt; also guarded), so a status computed
		// from a copy that is no longer current must not overwrite its write
		// (nor may a stale copy start a job twice). A conflict requeues; the
		// next reconcile sees the current item.
		locked := client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})
		err := r.client.Status().Patch(ctx, obj, locked, owner)
		if apierrors.IsInvalid(err) {
			// The API server refuses the status (e.g. a provider status the
			// schema rejects). Retrying would only repeat that: end the job
			// Failed with the refusal as lastError, keeping the old provider status.
			s.log.Error(err, "status refused by the API server; failing the job")
			obj = s.orig.DeepCopy()
			obj.Status = *s.item.Status.DeepCopy()
			obj.Status.ProviderStatus = s.orig.Status.ProviderStatus
			obj.Status.ExportReference = s.orig.Status.ExportReference
			obj.Status.Phase = lsv1alpha1.PhaseFailed
			obj.Status.JobIDFinished = obj.Status.JobID
			now := metav1.NewTime(r.now())
			obj.Status.LastError = &lsv1alpha1.Error{
				Operation: OperationReconcile, Reason: ReasonStatusWriteFailed,
				Message: "the API server refused the deploy item's status: " + err.Error(),
				Codes:   []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}, LastTransitionTime: now, LastUpdateTime: now,
			}
			r.event(s, corev1.EventTypeWarning, ReasonStatusWriteFailed, "%s", obj.Status.LastError.Message)
			err = r.client.Status().Patch(ctx, obj, locked, owner)
		}
		if err != nil {
			return fmt.Errorf("writing status of deploy item: %w", err)
		}
		if s.orig.Status.Phase != s.item.Status.Phase {
			s.log.Info("phase changed", "from", s.orig.Status.Phase, "to", s.item.Status.Phase, "jobID", s.item.Status.JobID, "jobIDFinished", s.item.Status.JobIDFinished)
		}
		// A write that changed nothing on the server (e.g. a time equal at
		// second precision) keeps the resourceVersion: nothing was replaced.
		if obj.ResourceVersion != s.orig.ResourceVersion {
			replaced = append(replaced, s.orig.ResourceVersion)
		}
		latest = obj
	}

	_, rv, err := r.patchMetadata(ctx, s, latest)
	if rv != "" {
		replaced = append(replaced, rv)
	}
	return err
}

// persistMetadata writes the metadata changes collected so far ahead of the
// status (see doReconcile); the reconcile goes on from the written item,
// with the status it computed.
func (r *Reconciler) persistMetadata(ctx context.Context, s *scope) error {
	obj, rv, err := r.patchMetadata(ctx, s, s.orig)
	if err != nil {
		return err
	}
	if rv != "" {
		s.replaced = append(s.replaced, rv)
	}
	s.orig = obj
	s.item.ObjectMeta = *obj.ObjectMeta.DeepCopy()
	s.removeAnnotations, s.setAnnotations, s.addFinalizer = nil, nil, false
	return nil
}

// patchMetadata writes the metadata changes the reconcile collected
// (annotation removals, the trace context of a job the deployer starts
// itself, the finalizer) on top of latest. It returns the item as written and
// the resourceVersion the write replaced ("" when nothing was written).
func (r *Reconciler) patchMetadata(ctx context.Context, s *scope, latest *lsv1alpha1.DeployItem) (*lsv1alpha1.DeployItem, string, error) {
	base := latest.DeepCopy()
	obj := latest.DeepCopy()
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
	finalizers := false
	if s.addFinalizer && obj.DeletionTimestamp == nil {
		finalizers = controllerutil.AddFinalizer(obj, lsv1alpha1.Finalizer) || finalizers
	}
	if s.removeFinalizer {
		finalizers = controllerutil.RemoveFinalizer(obj, lsv1alpha1.Finalizer) || finalizers
	}
	if !changed && !finalizers {
		return latest, "", nil
	}
	// Always with a resourceVersion precondition: a merge patch replaces the
	// whole finalizer list, and removing an annotation must not remove a value
	// somebody wrote after our read (a new operation: reconcile replacing the
	// force-reconcile we are done with). A conflict requeues the item, and
	// the next reconcile sees the new value.
	p := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, obj, p, client.FieldOwner(r.opts.Name)); err != nil {
		return nil, "", fmt.Errorf("writing metadata of deploy item: %w", err)
	}
	if obj.ResourceVersion == base.ResourceVersion {
		return obj, "", nil
	}
	return obj, base.ResourceVersion, nil
}
