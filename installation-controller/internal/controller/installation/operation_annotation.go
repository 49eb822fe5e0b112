package installation

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/status"
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

// ReasonReconcileAnnotationNeeded: a Normal event, and the reason of the
// Ready condition, when the spec of a root installation whose last job
// failed changed: no job starts on its own (seed 002: only the reconcile
// annotation starts a root's job), which a user fixing the spec may not
// expect. Ready gets this reason of its own, not the failed job's: with the
// new generation as observedGeneration, the old reason (say TemplateFailed)
// would read as the new spec failing, which no job has tried.
const ReasonReconcileAnnotationNeeded = "ReconcileAnnotationNeeded"

// hintNewJobAfterFailure says, on an idle root installation whose last job
// failed and whose spec changed since that job started, that the new spec
// runs only in a new job and how to start one: in the Ready condition
// (observedGeneration the current one, reason ReconcileAnnotationNeeded;
// the failure follows the hint in its message, and lastError keeps it) and
// in one event. Both once per generation: the message names it, and a Ready
// that already says it is not written again. A job that failed SpecChanged
// (the spec changed while it ran) said so itself, for the generation its
// failure saw. The command carries --overwrite: without it kubectl refuses
// to replace an operation annotation already there (a typo such as
// "reconcil" left in place).
func (r *Reconciler) hintNewJobAfterFailure(s *scope) {
	inst := s.inst
	st := inst.Status
	if !isRoot(inst) || inst.DeletionTimestamp != nil || st.Phase != lsv1alpha1.PhaseFailed ||
		st.JobID != st.JobIDFinished || inst.Generation == st.ObservedGeneration {
		return
	}
	ready := apimeta.FindStatusCondition(st.Conditions, lsv1alpha1.ConditionReady)
	if st.LastError != nil && st.LastError.Reason == ReasonSpecChanged && ready != nil && ready.ObservedGeneration == inst.Generation {
		return
	}
	hint := fmt.Sprintf("the spec changed since job %s failed (generation %d; the job ran generation %d), and no job starts on its own: "+
		"`kubectl annotate installation %s %s=%s --overwrite -n %s` starts a new job",
		st.JobID, inst.Generation, st.ObservedGeneration, inst.Name, lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile, inst.Namespace)
	reason, msg := ReasonReconcileAnnotationNeeded, hint
	if le := st.LastError; le != nil {
		msg = hint + "; the job failed: " + le.Reason + ": " + le.Message
	}
	if status.Has(st.Conditions, status.ConditionReady, metav1.ConditionFalse, reason, msg) {
		return
	}
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionFalse, reason, msg)
	s.patch.OnStored(func() {
		r.Recorder.Eventf(inst, nil, "Normal", ReasonReconcileAnnotationNeeded, "Reconcile", "%s", hint)
	})
}
