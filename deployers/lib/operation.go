package lib

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// knownOperations are the values of the operation annotation a deployer acts
// on (on a deploy item); anything else is reported once and ignored.
var knownOperations = []lsv1alpha1.Operation{
	lsv1alpha1.OperationReconcile, lsv1alpha1.OperationForceReconcile, lsv1alpha1.OperationAbort,
}

// unknownOperations remembers, per item, the unknown operation value last
// reported, so a typo (say "reconcil") is one Warning Event, not one per
// reconcile. Process memory only: a restarted deployer reports it once more.
type unknownOperations struct {
	mu       sync.Mutex
	reported map[types.NamespacedName]string
}

// report reports whether value is new for key (and remembers it); an empty
// value forgets key, so a typo made again later is reported again.
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

func (u *unknownOperations) forget(key types.NamespacedName) { u.report(key, "") }

// checkOperation emits a Warning Event UnknownOperation when the item's
// operation annotation holds a value no deployer acts on: without it a typo
// would be ignored silently for ever. The annotation is the user's and
// stays. No request on the normal path (the Event only on this one).
func (r *Reconciler) checkOperation(s *scope) {
	key := types.NamespacedName{Namespace: s.orig.Namespace, Name: s.orig.Name}
	op, ok := s.orig.Annotations[lsv1alpha1.OperationAnnotation]
	if !ok || isKnownOperation(op) {
		r.unknownOps.forget(key)
		return
	}
	if !r.unknownOps.report(key, op) {
		return
	}
	accepted := make([]string, len(knownOperations))
	for i, o := range knownOperations {
		accepted[i] = string(o)
	}
	s.log.Info("ignoring unknown operation", "operation", op, "accepted", accepted)
	r.recorder.Eventf(s.orig, nil, corev1.EventTypeWarning, ReasonUnknownOperation, ReasonUnknownOperation,
		"annotation %s: unknown value %q is ignored; accepted on deploy items: %s",
		lsv1alpha1.OperationAnnotation, op, strings.Join(accepted, ", "))
}

func isKnownOperation(op string) bool {
	for _, o := range knownOperations {
		if string(o) == op {
			return true
		}
	}
	return false
}
