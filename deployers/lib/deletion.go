package lib

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// runDelete runs the deletion of the item after the BeforeDelete hooks: the
// deployer's Delete (span "DeployItem.Delete"), then the finalizer goes. With
// delete-without-uninstall: "true", or with an unusable Target or Context
// and nothing installed, the finalizer goes without Delete.
func (r *Reconciler) runDelete(ctx context.Context, s *scope) (flow.Result, error) {
	if stop, err := r.runHooks(ctx, s, extension.BeforeDeleteHook); err != nil || stop {
		return flow.Stop(), err
	}
	di := s.item
	if di.Status.Phase != lsv1alpha1.PhaseDeleting {
		r.startDeletion(s)
		r.event(s, corev1.EventTypeNormal, ReasonDeleting, "deleting")
	}
	switch {
	case di.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true":
		r.event(s, corev1.EventTypeNormal, ReasonUninstallSkipped, "delete-without-uninstall: leaving installed objects in place")
		s.removeFinalizer = true
	case s.targetErr != nil && r.nothingToUninstall(di):
		r.deleteUninstalled(ctx, s)
	case s.targetErr != nil:
		r.outcome(s, OperationDelete, lsv1alpha1.PhaseDeleting, ReasonDeleteFailed, Result{}, s.targetErr)
	default:
		r.callDelete(ctx, s)
	}
	return flow.Continue(), nil
}

// deleteUninstalled deletes an item that has nothing installed (typically:
// the Target or Context was wrong from the start, so no job ever reached
// the deployer): no Target or Context is needed for it. Only the library's
// own export Secret, if any, goes.
func (r *Reconciler) deleteUninstalled(ctx context.Context, s *scope) {
	if s.item.Status.ExportReference != nil {
		if err := DeleteExport(ctx, r.client, s.item); err != nil {
			r.outcome(s, OperationDelete, lsv1alpha1.PhaseDeleting, ReasonDeleteFailed, Result{}, err)
			return
		}
	}
	s.removeFinalizer = true
	r.event(s, corev1.EventTypeNormal, ReasonDeleted, "deleted; nothing to uninstall (%v); finalizer removed", s.targetErr)
}

// callDelete calls the deployer's Delete; once it is done the finalizer goes.
func (r *Reconciler) callDelete(ctx context.Context, s *scope) {
	dctx, span := tracing.StartStep(ctx, tracer(), Kind, "Delete", AttrDeployer.String(r.opts.Name))
	req := r.request(s, false)
	res, err := r.call(dctx, func(ctx context.Context) (Result, error) { return r.deployer.Delete(ctx, req) })
	tracing.EndStep(span, err)
	if err == nil && !res.Pending {
		s.removeFinalizer = true
		r.event(s, corev1.EventTypeNormal, ReasonDeleted, "deleted; finalizer removed")
		return
	}
	r.outcome(s, OperationDelete, lsv1alpha1.PhaseDeleting, ReasonDeleteFailed, res, err)
}

// nothingToUninstall reports whether the item has nothing installed that its
// deletion must remove: the deployer's UninstallChecker if it implements
// one, else an empty status.providerStatus (the deployer's record of what it
// installed; nil when Reconcile never ran).
func (r *Reconciler) nothingToUninstall(di *lsv1alpha1.DeployItem) bool {
	if c, ok := r.deployer.(UninstallChecker); ok {
		return c.NothingToUninstall(di)
	}
	return di.Status.ProviderStatus == nil || len(di.Status.ProviderStatus.Raw) == 0
}

// startDeletion enters phase Deleting with a fresh lastReconcileTime: the
// deletion's deadline (and the pending deletion's bound) counts from its own
// start, not from the last install job, which may be long past.
func (r *Reconciler) startDeletion(s *scope) {
	now := metav1.NewTime(r.now())
	s.item.Status.Phase = lsv1alpha1.PhaseDeleting
	s.item.Status.LastReconcileTime = &now
}

// deleteFailedHint ends the lastError message of every failed deletion.
var deleteFailedHint = fmt.Sprintf("; fix the cause and retry the deletion with the annotation %s: %s, or annotate the item with %s: \"true\" to delete it without uninstalling",
	lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile, lsv1alpha1.DeleteWithoutUninstallAnnotation)
