package execution

import (
	"context"
	"strings"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ReasonUnknownOperation is the Warning Event for a value of the operation
// annotation this controller does not act on (it is ignored).
const ReasonUnknownOperation = "UnknownOperation"

// executionOperations are the values of the operation annotation an
// execution acts on.
var executionOperations = []lsv1alpha1.Operation{lsv1alpha1.OperationReconcile, lsv1alpha1.OperationInterrupt}

// unknownOperations remembers, per execution, the unknown operation value
// last reported, so a typo (say "reconcil") is one Warning Event, not one per
// reconcile. Process memory only: a restarted controller reports it once more.
type unknownOperations struct {
	mu       sync.Mutex
	reported map[types.NamespacedName]string
}

// report reports whether value is new for key (and remembers it); an empty
// value forgets key, so the same typo made again later is reported again.
func (u *unknownOperations) report(key types.NamespacedName, value string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if value == "" {
		if len(u.reported) > 0 {
			delete(u.reported, key)
		}
		return false
	}
	if u.reported[key] == value {
		return false
	}
	if u.reported == nil {
		u.reported = map[types.NamespacedName]string{}
	}
	u.reported[key] = value
	return true
}

// checkOperation emits a Warning Event UnknownOperation, once per distinct
// value, when the execution's operation annotation holds a value it does not
// act on: without it a typo would be ignored silently for ever. The
// annotation is the user's and stays. No request on the normal path.
func (r *Reconciler) checkOperation(ctx context.Context, s *scope) {
	key := types.NamespacedName{Namespace: s.exec.Namespace, Name: s.exec.Name}
	op, ok := s.exec.Annotations[lsv1alpha1.OperationAnnotation]
	accepted := make([]string, len(executionOperations))
	known := false
	for i, o := range executionOperations {
		accepted[i] = string(o)
		known = known || string(o) == op
	}
	if !ok || known {
		r.unknownOps.report(key, "")
		return
	}
	if !r.unknownOps.report(key, op) {
		return
	}
	logf.FromContext(ctx).Info("ignoring unknown operation", "operation", op, "accepted", accepted)
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonUnknownOperation, "Reconcile",
		"annotation %s: unknown value %q is ignored; accepted on executions: %s",
		lsv1alpha1.OperationAnnotation, op, strings.Join(accepted, ", "))
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
