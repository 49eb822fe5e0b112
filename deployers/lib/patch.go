package lib

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
		// next reconcile sees the current item. Only the record of what the
		// deployer installed is written anyway (keepRecord).
		locked := client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})
		// The record of what is installed that this write carries: kept
		// apart, since a failed write may leave obj in any state.
		rec := recordOf(obj)
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
			rec = recordOf(obj)
			err = r.client.Status().Patch(ctx, obj, locked, owner)
		}
		if apierrors.IsConflict(err) {
			// The job's outcome is dropped (the next reconcile computes it
			// from the current item), but not the record of what the
			// deployer did to the target: see keepRecord.
			if rv := r.keepRecord(ctx, s, rec); rv != "" {
				replaced = append(replaced, rv)
			}
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

// installed is the part of the status that records what the deployer did
// outside the item: status.providerStatus (what it installed on the target,
// e.g. the manifest deployer's managedResources) and status.exportRef (the
// export Secret the item owns). These are the fields a Deployer sets (see
// Deployer); the library reads them to uninstall (nothingToUninstall,
// Delete) and to clean up the export.
type installed struct {
	providerStatus *runtime.RawExtension
	exportRef      *lsv1alpha1.ObjectReference
}

func recordOf(di *lsv1alpha1.DeployItem) installed {
	return installed{providerStatus: di.Status.ProviderStatus.DeepCopy(), exportRef: di.Status.ExportReference.DeepCopy()}
}

// recordAttempts bounds keepRecord's writes when they conflict again.
const recordAttempts = 3

// keepRecord saves the installed-state record of a status write that
// conflicted. The status write is guarded by the resourceVersion the
// reconcile read, so it is lost whenever the item changed meanwhile — e.g.
// the execution controller interrupted or timed out the job (phase Failed,
// jobIDFinished) while the deployer applied. Dropping the job's outcome is
// right (the next reconcile decides it from the current item), but the
// deployer's side effects on the target already happened: if their record
// were dropped too, a reconcile of an item that is no longer in a job (or an
// abort, or the deletion) would never record them, and deleting the item
// would leave them on the target. The next reconcile is not relied upon: the
// record is written now.
//
// It re-reads the item from the API server and writes only providerStatus and
// exportRef, guarded by the fresh resourceVersion; phase, jobIDFinished,
// lastError and the conditions stay what the other writer set. A field is
// written only where this reconcile changed it and the current item still
// holds the value the reconcile read (compare-and-swap per field: a value
// somebody else wrote meanwhile is not overwritten). It runs only after a
// conflict, so the normal path makes no extra request. It returns the
// resourceVersion its write replaced ("" when it wrote nothing); failures are
// logged, and the caller requeues as for any conflict.
func (r *Reconciler) keepRecord(ctx context.Context, s *scope, want installed) string {
	read := recordOf(s.orig)
	psChanged := !equality.Semantic.DeepEqual(want.providerStatus, read.providerStatus)
	exChanged := !equality.Semantic.DeepEqual(want.exportRef, read.exportRef)
	if !psChanged && !exChanged {
		return "" // the write recorded nothing new about the target
	}
	key := client.ObjectKeyFromObject(s.orig)
	log := s.log.WithValues("jobID", s.item.Status.JobID)
	for range recordAttempts {
		cur := &lsv1alpha1.DeployItem{}
		if err := r.reader.Get(ctx, key, cur); err != nil {
			if !apierrors.IsNotFound(err) {
				log.Error(err, "re-reading deploy item to keep the record of what is installed")
			}
			return ""
		}
		if cur.UID != s.orig.UID {
			return "" // another item of the same name: not what was applied for
		}
		obj := cur.DeepCopy()
		var write, foreign []string
		if psChanged {
			switch {
			case equality.Semantic.DeepEqual(cur.Status.ProviderStatus, want.providerStatus):
			case equality.Semantic.DeepEqual(cur.Status.ProviderStatus, read.providerStatus):
				obj.Status.ProviderStatus = want.providerStatus.DeepCopy()
				write = append(write, "providerStatus")
			default:
				foreign = append(foreign, "providerStatus")
			}
		}
		if exChanged {
			switch {
			case equality.Semantic.DeepEqual(cur.Status.ExportReference, want.exportRef):
			case equality.Semantic.DeepEqual(cur.Status.ExportReference, read.exportRef):
				obj.Status.ExportReference = want.exportRef.DeepCopy()
				write = append(write, "exportRef")
			default:
				foreign = append(foreign, "exportRef")
			}
		}
		if len(foreign) > 0 {
			log.Error(nil, "record of what is installed changed by another writer while reconciling; not overwriting it",
				"fields", foreign, "resourceVersion", cur.ResourceVersion)
		}
		if len(write) == 0 {
			return ""
		}
		p := client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
		err := r.client.Status().Patch(ctx, obj, p, client.FieldOwner(r.opts.Name))
		if err == nil {
			log.Info("status write conflicted; kept the record of what is installed",
				"fields", write, "phase", cur.Status.Phase, "jobIDFinished", cur.Status.JobIDFinished)
			if obj.ResourceVersion == cur.ResourceVersion {
				return ""
			}
			return cur.ResourceVersion
		}
		if !apierrors.IsConflict(err) {
			log.Error(err, "writing the record of what is installed after a conflict", "fields", write)
			return ""
		}
	}
	log.Error(nil, "record of what is installed not kept: the deploy item kept changing", "attempts", recordAttempts)
	return ""
}
