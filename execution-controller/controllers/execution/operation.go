package execution

import (
	"context"
	"unicode/utf8"

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

// maxCauseLength bounds the failed item's message quoted in the execution's
// lastError (the installation above quotes the execution's in turn).
const maxCauseLength = 300

// firstCause names the first failed item (in the order given) whose
// lastError says why, with its reason and message, for the execution's
// lastError: "; <item>: <reason>: <message>" (the message cut to
// maxCauseLength), or "" when none says anything.
func firstCause(items map[string]*lsv1alpha1.DeployItem, failed []string) string {
	for _, n := range failed {
		di := items[n]
		if di == nil || di.Status.LastError == nil {
			continue
		}
		le := di.Status.LastError
		msg := le.Message
		if len(msg) > maxCauseLength {
			cut := maxCauseLength
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
		out := "; " + n + ": "
		if le.Reason != "" {
			out += le.Reason
			if msg != "" {
				out += ": "
			}
		}
		return out + msg
	}
	return ""
}

// firstCodes are the lastError codes of the first failed item that has any.
func firstCodes(items map[string]*lsv1alpha1.DeployItem, failed []string) []lsv1alpha1.ErrorCode {
	for _, n := range failed {
		if di := items[n]; di != nil && di.Status.LastError != nil && len(di.Status.LastError.Codes) > 0 {
			return append([]lsv1alpha1.ErrorCode(nil), di.Status.LastError.Codes...)
		}
	}
	return nil
}
