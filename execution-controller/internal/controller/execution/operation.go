package execution

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// ReasonUnknownOperation is the Warning Event for a value of the operation
// annotation this controller does not act on (it is ignored).
const ReasonUnknownOperation = unknownop.Reason

// executionOperations are the values of the operation annotation an
// execution acts on.
var executionOperations = []string{string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationInterrupt)}

func (r *Reconciler) checkOperation(ctx context.Context, s *scope) (flow.Result, error) {
	op, report := r.unknownOps.Check(s.exec, executionOperations)
	if !report {
		return flow.Continue(), nil
	}
	logf.FromContext(ctx).Info("ignoring unknown operation", "operation", op, "accepted", executionOperations)
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonUnknownOperation, "Reconcile",
		"%s", unknownop.Message(op, "executions", executionOperations))
	return flow.Continue(), nil
}

func operation(o client.Object) lsv1alpha1.Operation {
	return lsv1alpha1.Operation(o.GetAnnotations()[lsv1alpha1.OperationAnnotation])
}

// removeOperation removes the operation annotation if it still holds op: run
// it after the status write that acted on it (status.AfterStored), so it is
// never lost.
func (r *Reconciler) removeOperation(s *scope, op lsv1alpha1.Operation) func(context.Context) error {
	return func(ctx context.Context) error {
		if operation(s.exec) != op {
			return nil
		}
		return s.status.Track(s.exec, func() error {
			return patch.Annotations(ctx, r.Client, r.FieldManager, s.exec, "",
				map[string]*string{lsv1alpha1.OperationAnnotation: nil})
		})
	}
}

// ignoreConflict drops a conflict: the newer version of the object brings
// the next reconcile.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
