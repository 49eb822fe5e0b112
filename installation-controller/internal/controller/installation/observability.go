package installation

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/jobs"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Kind is the object kind in span names ("Installation.Reconcile",
// "Installation.<Phase>"), span attributes and metric labels.
const Kind = "Installation"

// TracerName names the tracer of this package.
const TracerName = "github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"

// AttrWaitingFor is the span attribute saying what a waiting phase waits for.
const AttrWaitingFor = attribute.Key("terrace.waiting_for")

// tracer is looked up on every reconcile rather than once: the global
// provider may be installed (or replaced, in tests) after the controller was
// built, and a tracer obtained earlier would keep the first provider.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// startsRootJob reports whether this reconcile starts a job of a root
// installation. Such a job is a trace of its own: its reconcile span is the
// trace's root, whatever an earlier job left in the trace-context annotation.
func startsRootJob(inst *lsv1alpha1.Installation) bool {
	if !isRoot(inst) {
		return false
	}
	switch jobs.Decide(jobState(inst)).Action {
	case jobs.StartNewJob, jobs.StartHandedJob:
		return true
	}
	return false
}

func jobState(inst *lsv1alpha1.Installation) jobs.State {
	return jobs.State{
		Root:          isRoot(inst),
		Deleting:      inst.DeletionTimestamp != nil,
		Operation:     lsv1alpha1.Operation(inst.Annotations[lsv1alpha1.OperationAnnotation]),
		Phase:         inst.Status.Phase,
		JobID:         inst.Status.JobID,
		JobIDFinished: inst.Status.JobIDFinished,
	}
}

// inAJob reports whether a reconcile of inst belongs to a job whose trace the
// installation's trace-context annotation holds, from the object as the
// cache shows it (no request): a job is running (status.jobID !=
// status.jobIDFinished); a root's job whose start was consumed but never
// reached the status is resumed (startLost: the reconcile that began it wrote
// its span context first); or a deleted sub-installation waits for, or starts,
// its deletion job (the parent that deleted it wrote the deleting phase's
// span context into it first, and one whose parent is gone deletes itself as
// before). A root's deletion is a job like any other: the start rules start
// it, and a DeleteFailed root without a reconcile annotation is idle.
func inAJob(inst *lsv1alpha1.Installation) bool {
	state := jobState(inst)
	if state.Running() || startLost(inst) || (state.Deleting && !state.Root) {
		return true
	}
	switch jobs.Decide(state).Action {
	case jobs.StartNewJob, jobs.StartHandedJob:
		return true
	}
	return false
}

// reconcileTrace returns what the reconcile span continues and the job ID it
// carries. A reconcile that starts a root job is the root of a new trace (its
// job ID is set once the job starts); a reconcile outside any job (a resync,
// a sub-object's or an import's event that changes nothing, a re-check, an
// annotation edit) is a trace of its own without a job ID: continuing the
// last job's trace would make a long-lived installation's trace grow for
// ever. Every other reconcile continues the job's trace from the annotation.
func reconcileTrace(inst *lsv1alpha1.Installation) (client.Object, string) {
	bare := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: inst.Name}}
	switch {
	case startsRootJob(inst):
		return bare, inst.Status.JobID
	case !inAJob(inst):
		return bare, ""
	}
	return inst, inst.Status.JobID
}

// writeOwnTraceContext stores the span context of ctx (the reconcile that
// starts a root job) in the installation's own trace-context annotation, so
// that every later reconcile of the job, and everything the job is handed
// to, joins this one trace. Only while tracing is on; one metadata patch,
// guarded by the resourceVersion read (a stale cache conflicts here instead
// of starting a second job). The installation's status is left as read.
func (r *Reconciler) writeOwnTraceContext(ctx context.Context, inst *lsv1alpha1.Installation) error {
	value, ok := tracing.ContextToWrite(ctx, inst.Annotations)
	if !ok {
		return nil
	}
	status := inst.Status.DeepCopy()
	p := mergePatch{"metadata": map[string]any{
		"annotations":     map[string]any{tracing.TraceContextAnnotation: value},
		"resourceVersion": inst.ResourceVersion,
	}}
	err := r.Client.Patch(ctx, inst, p, client.FieldOwner(FieldManager))
	inst.Status = *status
	return err
}

// handOverTraceContext writes the span context of ctx into obj's
// trace-context annotation before a job is handed to obj through its status
// (a status write cannot carry metadata). Only while tracing is on.
func handOverTraceContext(ctx context.Context, c client.Client, obj client.Object) error {
	return patchAnnotations(ctx, c, obj, tracing.AddToPatch(ctx, obj.GetAnnotations(), nil))
}

// prepareDeletion writes, before this controller deletes obj as part of the
// running job (a deletion job, or an orphan's cleanup in an install job),
// the annotations set and, while tracing is on, the job's span context, in
// one metadata patch and only when something changes. obj's deletion
// reconciles (and, below it, its execution's and the deployers') then
// continue this job's trace, not the one of the job that created obj. gone
// reports that obj does not exist any more: nothing is left to delete.
func prepareDeletion(ctx context.Context, c client.Client, obj client.Object, set map[string]*string) (gone bool, err error) {
	err = patchAnnotations(ctx, c, obj, tracing.AddToPatch(ctx, obj.GetAnnotations(), set))
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("before deleting it: %w", err)
	}
	return false, nil
}

// jobStartTime is the start of the running job as the status records it: the
// Ready condition turns Unknown when a job starts and stays so until it ends.
// Zero when the status records none (metrics.JobClock's fallback).
func jobStartTime(inst *lsv1alpha1.Installation) time.Time {
	c := apimeta.FindStatusCondition(inst.Status.Conditions, lsv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionUnknown {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}
