// Package unknownop reports a value of the landscaper.gardener.cloud/operation
// annotation that a controller does not act on (a typo such as "reconcil"),
// once per object and value: ignored without a word, the typo would leave the
// user waiting for ever; reported on every reconcile, it would flood the
// Events. The annotation is the user's and stays where it is.
package unknownop

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Reason is the reason of the Warning Event for an unknown value.
const Reason = "UnknownOperation"

// Tracker remembers, per object, the unknown value last reported. Process
// memory only: a restarted controller reports a value still there once more.
// The zero value is ready to use; it is safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	reported map[types.NamespacedName]reported
}

// reported is a value reported for one object, by UID: an object created
// again under the same name is another object, told again.
type reported struct {
	uid   types.UID
	value string
}

// Check returns the value of obj's operation annotation and true when it is
// not one of accepted and has not been reported for obj yet (it is then
// remembered as reported). An absent or accepted value forgets obj, so a
// typo made again later is reported again. It costs no request.
func (t *Tracker) Check(obj metav1.Object, accepted []string) (string, bool) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	value, ok := obj.GetAnnotations()[lsv1alpha1.OperationAnnotation]
	if !ok || slices.Contains(accepted, value) {
		t.Forget(key)
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := reported{uid: obj.GetUID(), value: value}
	if t.reported[key] == r {
		return "", false
	}
	if t.reported == nil {
		t.reported = map[types.NamespacedName]reported{}
	}
	t.reported[key] = r
	return value, true
}

// Forget drops what was reported for the object key (call it when the object
// is gone).
func (t *Tracker) Forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.reported) > 0 {
		delete(t.reported, key)
	}
}

// Message is the Event message for value on a kind that accepts accepted.
func Message(value, kind string, accepted []string) string {
	return "annotation " + lsv1alpha1.OperationAnnotation + ": unknown value \"" + value + "\" is ignored (the annotation is left in place); " +
		kind + " accept " + strings.Join(accepted, ", ")
}
