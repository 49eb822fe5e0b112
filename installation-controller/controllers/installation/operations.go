package installation

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ReasonUnknownOperation: a Warning event for a value of the operation
// annotation that an Installation does not act on (a typo such as
// "reconcil"), which would otherwise be ignored without a word.
const ReasonUnknownOperation = "UnknownOperation"

// installationOperations are the values of the operation annotation an
// Installation acts on. force-reconcile and abort are deploy items'.
var installationOperations = []string{string(lsv1alpha1.OperationReconcile), string(lsv1alpha1.OperationInterrupt)}

// unknownOperations remembers, per installation, the unknown operation
// value it was last warned about, so each distinct value is warned about
// once (per controller process), not on every reconcile. Reading it costs
// no request; entries go when the value does, or the installation.
type unknownOperations struct {
	mu     sync.Mutex
	warned map[types.NamespacedName]unknownOperation
}

type unknownOperation struct {
	uid   types.UID
	value string
}

// first records value for key and reports whether it is new.
func (u *unknownOperations) first(key types.NamespacedName, uid types.UID, value string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.warned == nil {
		u.warned = map[types.NamespacedName]unknownOperation{}
	}
	op := unknownOperation{uid: uid, value: value}
	if u.warned[key] == op {
		return false
	}
	u.warned[key] = op
	return true
}

func (u *unknownOperations) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.warned) > 0 {
		delete(u.warned, key)
	}
}

// warnUnknownOperation emits a Warning event UnknownOperation the first
// time an installation carries an operation annotation value it does not
// act on. The annotation stays: it is the user's, and removing it would hide
// the typo.

func (r *Reconciler) warnUnknownOperation(ctx context.Context, inst *lsv1alpha1.Installation) {
	value, ok := inst.Annotations[lsv1alpha1.OperationAnnotation]
	k := key(inst)
	if !ok || isInstallationOperation(value) {
		r.unknownOps.forget(k)
		return
	}
	if !r.unknownOps.first(k, inst.UID, value) {
		return
	}
	accepted := strings.Join(installationOperations, ", ")
	logf.FromContext(ctx).Info("unknown value of the operation annotation; ignored", "annotation", lsv1alpha1.OperationAnnotation, "value", value, "accepted", accepted)
	r.Recorder.Eventf(inst, nil, "Warning", ReasonUnknownOperation, "Reconcile",
		"annotation %s has the unknown value %q, which does nothing: an Installation accepts %s (the annotation is left in place)",
		lsv1alpha1.OperationAnnotation, value, accepted)
}

func isInstallationOperation(value string) bool {
	return slices.Contains(installationOperations, value)
}
