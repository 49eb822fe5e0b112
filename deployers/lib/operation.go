package lib

import (
	corev1 "k8s.io/api/core/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// knownOperations are the values of the operation annotation a deployer acts
// on (on a deploy item); anything else is reported once and ignored.
var knownOperations = []string{
	string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationForceReconcile), string(lsv1alpha1.OperationAbort),
}

// checkOperation emits a Warning Event UnknownOperation, once per item and
// value (kit/unknownop), when the item's operation annotation holds a value
// no deployer acts on: without it a typo would be ignored silently for ever.
// The annotation is the user's and stays. No request on the normal path
// (the Event only on this one).
func (r *Reconciler) checkOperation(s *scope) {
	op, report := r.unknownOps.Check(s.orig, knownOperations)
	if !report {
		return
	}
	s.log.Info("ignoring unknown operation", "operation", op, "accepted", knownOperations)
	r.recorder.Eventf(s.orig, nil, corev1.EventTypeWarning, ReasonUnknownOperation, ReasonUnknownOperation,
		"%s", unknownop.Message(op, "deploy items", knownOperations))
}
