package execution

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// ReasonUnknownOperation is the Warning Event for a value of the operation
// annotation this controller does not act on (it is ignored).
const ReasonUnknownOperation = unknownop.Reason

// executionOperations are the values of the operation annotation an
// execution acts on.
var executionOperations = []string{string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationInterrupt)}

// checkOperation emits a Warning Event UnknownOperation, once per execution
// and value (kit/unknownop), when the execution's operation annotation holds
// a value it does not act on: without it a typo would be ignored silently
// for ever. The annotation is the user's and stays. No request on the
// normal path.
func (r *Reconciler) checkOperation(ctx context.Context, s *scope) {
	op, report := r.unknownOps.Check(s.exec, executionOperations)
	if !report {
		return
	}
	logf.FromContext(ctx).Info("ignoring unknown operation", "operation", op, "accepted", executionOperations)
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonUnknownOperation, "Reconcile",
		"%s", unknownop.Message(op, "executions", executionOperations))
}
