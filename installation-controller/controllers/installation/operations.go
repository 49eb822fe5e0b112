package installation

import (
	"context"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// ReasonUnknownOperation: a Warning event for a value of the operation
// annotation that an Installation does not act on (a typo such as
// "reconcil"), which would otherwise be ignored without a word.
const ReasonUnknownOperation = unknownop.Reason

// installationOperations are the values of the operation annotation an
// Installation acts on. force-reconcile and abort are deploy items'.
var installationOperations = []string{string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationInterrupt)}

// warnUnknownOperation emits a Warning event UnknownOperation the first
// time an installation carries an operation annotation value it does not
// act on (once per installation and value: kit/unknownop). The annotation
// stays: it is the user's, and removing it would hide the typo.
func (r *Reconciler) warnUnknownOperation(ctx context.Context, inst *lsv1alpha1.Installation) {
	value, report := r.unknownOps.Check(inst, installationOperations)
	if !report {
		return
	}
	logf.FromContext(ctx).Info("unknown value of the operation annotation; ignored", "annotation", lsv1alpha1.OperationAnnotation, "value", value, "accepted", installationOperations)
	r.Recorder.Eventf(inst, nil, "Warning", ReasonUnknownOperation, "Reconcile",
		"%s", unknownop.Message(value, "Installations", installationOperations))
}
