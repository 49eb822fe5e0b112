package lib

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
)

// decideReconcile ends the reconcile of an item that needs no work: only
// items in a job (Init, Progressing, Deleting), being deleted, or carrying
// operation abort/force-reconcile are reconciled. A ShouldReconcile hook
// result with AbortReconcile false forces a reconcile (e.g. a periodic
// re-apply); true cannot stop a needed one.
func (r *Reconciler) decideReconcile(ctx context.Context, s *scope) (flow.Result, error) {
	should := r.shouldReconcile(s)
	hr, err := r.executeHooks(ctx, s, extension.ShouldReconcileHook)
	if err != nil {
		return flow.Stop(), err
	}
	if hr != nil {
		s.hookResult = extension.AggregateHookResults(extension.ShouldReconcileHook, s.hookResult, hr)
		if !hr.AbortReconcile && !should {
			should, s.forced = true, true
		}
	}
	if !should {
		r.dropStaleAnnotations(s)
		return flow.Stop(), nil
	}
	return flow.Continue(), nil
}

// shouldReconcile is the default should-reconcile check.
func (r *Reconciler) shouldReconcile(s *scope) bool {
	di := s.item
	op := lsv1alpha1.Operation(di.Annotations[lsv1alpha1.OperationAnnotation])
	if op == lsv1alpha1.OperationAbort {
		return inJob(di.Status.Phase) && di.Status.Phase != lsv1alpha1.PhaseDeleting
	}
	// A deletion is decided by the deletion alone: a force-reconcile on an
	// item being deleted is dropped (decideStart), not run — re-applying
	// would re-create objects that nothing deletes any more once the
	// finalizer is gone (another finalizer may hold the item).
	if di.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(di, lsv1alpha1.Finalizer) {
			return false
		}
		// A deletion that failed for good waits for a change (e.g. the user
		// adding delete-without-uninstall); the watch brings that.
		failedDelete := di.Status.Phase == lsv1alpha1.PhaseFailed && di.Status.LastError != nil && di.Status.LastError.Operation == OperationDelete
		return !failedDelete || di.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
	}
	if op == lsv1alpha1.OperationForceReconcile {
		return true
	}
	return inJob(di.Status.Phase)
}

// dropStaleAnnotations removes an abort request for an item that is not in a
// job any more: there is nothing to abort.
func (r *Reconciler) dropStaleAnnotations(s *scope) {
	if lsv1alpha1.Operation(s.item.Annotations[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationAbort {
		s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation, AbortReasonAnnotation)
	}
}
