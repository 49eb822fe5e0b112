package execution

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Kind is the object kind in span names ("Execution.Reconcile",
// "Execution.<Phase>"), span attributes and metric labels.
const Kind = "Execution"

// TracerName names the tracer of this package.
const TracerName = "github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"

// tracer is looked up on every reconcile rather than once: the global
// provider may be installed (or replaced, in tests) after the controller was
// built, and a tracer obtained earlier would keep the first provider.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// startsOwnJob reports whether this reconcile starts a job of an execution
// no installation owns (operation: reconcile, or its deletion). Such a job is
// a trace of its own, whatever an earlier job left in the annotation.
func startsOwnJob(exec *lsv1alpha1.Execution) bool {
	st := exec.Status
	if !isRoot(exec) || jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		return false
	}
	if exec.DeletionTimestamp != nil {
		return controllerutil.ContainsFinalizer(exec, lsv1alpha1.Finalizer) &&
			(st.Phase != lsv1alpha1.PhaseDeleteFailed || operation(exec) == lsv1alpha1.OperationReconcile)
	}
	return operation(exec) == lsv1alpha1.OperationReconcile
}

// inAJob reports whether a job runs (or was just handed over): only then is
// the trace in the execution's trace-context annotation the one a reconcile
// belongs to. Unlike a deploy item's, an execution's deletion is a job with
// a job ID of its own, so a deleted execution no job runs for (waiting for
// its installation's deletion job, or DeleteFailed) is not in one either.
func inAJob(exec *lsv1alpha1.Execution) bool {
	return jobid.HasNewJob(exec.Status.JobID, exec.Status.JobIDFinished)
}

// traceTarget is what the reconcile span continues, and the job ID it is
// recorded with: the execution's trace-context annotation and job while a
// job runs; otherwise nothing, so the reconcile is the root of a trace of
// its own. That is the new job's trace when the reconcile starts a job of
// its own (the job ID is added once it is known); else an idle reconcile
// (a resync, an item's status update after the job ended, an edit that
// waits for the next job), which has no job ID and must not add spans to
// the trace of the job that ended.
func traceTarget(exec *lsv1alpha1.Execution) (client.Object, string) {
	if !startsOwnJob(exec) && inAJob(exec) {
		return exec, exec.Status.JobID
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: exec.Namespace, Name: exec.Name}}, ""
}

// writeOwnTraceContext stores the span context of ctx (the reconcile that
// starts a job of a root execution) in the execution's own trace-context
// annotation, so every later reconcile of the job and every deploy item it
// is handed to join this one trace. Only while tracing is on; one metadata
// patch guarded by the resourceVersion read, written before the job starts.
// The execution's status is left as read.
func (r *Reconciler) writeOwnTraceContext(ctx context.Context, s *scope) error {
	value, ok := tracing.ContextToWrite(ctx, s.exec.Annotations)
	if !ok {
		return nil
	}
	status := s.exec.Status.DeepCopy()
	err := s.status.Track(s.exec, func() error {
		return patch.Annotations(ctx, r.Client, r.FieldManager, s.exec, s.exec.ResourceVersion,
			map[string]*string{tracing.TraceContextAnnotation: &value})
	})
	s.exec.Status = *status
	return err
}

// startPhase starts the step span "Execution.<phase>" of the reconcile span,
// with the phase attribute. End it with tracing.EndStep.
func startPhase(ctx context.Context, phase lsv1alpha1.Phase) (context.Context, trace.Span) {
	return tracing.StartStep(ctx, tracer(), Kind, string(phase), tracing.AttrPhase.String(string(phase)))
}

// jobStartTime is the start of the running job as the status records it
// (the Progressing condition's transition time, while it is True): the
// fallback of metrics.JobClock after a restart. Zero when there is none.
func jobStartTime(st *lsv1alpha1.ExecutionStatus) time.Time {
	if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}
