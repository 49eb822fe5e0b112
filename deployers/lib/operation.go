package lib

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// knownOperations are the values of the operation annotation a deployer acts
// on (on a deploy item); anything else is reported once and ignored.
var knownOperations = []string{
	string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationForceReconcile), string(lsv1alpha1.OperationAbort),
}

// runOperation runs exactly one of Abort, Delete, ForceReconcile and
// Reconcile, each after its Before* hooks; a Before* hook that ends the
// reconcile (or fails) also skips the End hooks.
func (r *Reconciler) runOperation(ctx context.Context, s *scope) (flow.Result, error) {
	switch op := lsv1alpha1.Operation(s.item.Annotations[lsv1alpha1.OperationAnnotation]); {
	case op == lsv1alpha1.OperationAbort:
		return r.runAbort(ctx, s)
	case s.item.DeletionTimestamp != nil:
		// Before force-reconcile: an item being deleted is never re-applied
		// (decideStart drops a force-reconcile on it), or it would re-create
		// what its deletion removes.
		return r.runDelete(ctx, s)
	case op == lsv1alpha1.OperationForceReconcile:
		return r.runReconcile(ctx, s, extension.BeforeForceReconcileHook)
	default:
		return r.runReconcile(ctx, s, extension.BeforeReconcileHook)
	}
}

// reportUnknownOperation emits a Warning Event UnknownOperation, once per
// item and value (kit/unknownop), when the item's operation annotation holds
// a value no deployer acts on: without it a typo would be ignored silently
// for ever. Only the responsible deployer reports it. The annotation is the
// user's and stays. No request on the normal path (the Event only on this
// one).
func (r *Reconciler) reportUnknownOperation(_ context.Context, s *scope) (flow.Result, error) {
	op, report := r.unknownOps.Check(s.orig, knownOperations)
	if !report {
		return flow.Continue(), nil
	}
	s.log.Info("ignoring unknown operation", "operation", op, "accepted", knownOperations)
	r.recorder.Eventf(s.orig, nil, corev1.EventTypeWarning, ReasonUnknownOperation, ReasonUnknownOperation,
		"%s", eventNote("%s", unknownop.Message(op, "deploy items", knownOperations)))
	return flow.Continue(), nil
}
