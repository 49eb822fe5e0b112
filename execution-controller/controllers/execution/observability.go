package execution

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
const TracerName = "github.com/terrace-dev/terrace/execution-controller/controllers/execution"

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

// traceTarget is what the reconcile span continues: the execution's
// trace-context annotation, or nothing when the reconcile starts its own job.
func traceTarget(exec *lsv1alpha1.Execution) client.Object {
	if startsOwnJob(exec) {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: exec.Namespace, Name: exec.Name}}
	}
	return exec
}

// writeOwnTraceContext stores the span context of ctx (the reconcile that
// starts a job of a root execution) in the execution's own trace-context
// annotation, so every later reconcile of the job and every deploy item it
// is handed to join this one trace. Only while tracing is on; one metadata
// patch guarded by the resourceVersion read, written before the job starts.
// The execution's status is left as read.
func (r *Reconciler) writeOwnTraceContext(ctx context.Context, s *scope) error {
	if !tracing.Enabled() {
		return nil
	}
	value, ok := tracing.Inject(ctx, s.exec.Annotations)[tracing.TraceContextAnnotation]
	if !ok || value == s.exec.Annotations[tracing.TraceContextAnnotation] {
		return nil
	}
	status := s.exec.Status.DeepCopy()
	err := patch.Annotations(ctx, r.Client, r.FieldManager, s.exec, s.exec.ResourceVersion,
		map[string]*string{tracing.TraceContextAnnotation: &value})
	s.exec.Status = *status
	return err
}

// startSpan starts a child span of the reconcile span for one phase.
func startSpan(ctx context.Context, phase lsv1alpha1.Phase, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, tracing.AttrPhase.String(string(phase)))
	return tracer().Start(ctx, Kind+"."+string(phase), trace.WithAttributes(attrs...))
}

// endSpan records err (if any) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// jobClock remembers when this process saw each job start, so a job's
// duration is exact (condition times have a resolution of one second). After
// a restart it falls back to the start the status records (the Progressing
// condition's transition time).
type jobClock struct{ m sync.Map }

type jobStart struct {
	job string
	at  time.Time
}

func (c *jobClock) start(key types.NamespacedName, job string, at time.Time) {
	c.m.Store(key, jobStart{job: job, at: at})
}

// finish returns the duration of job (negative when its start is unknown)
// and forgets it.
func (c *jobClock) finish(key types.NamespacedName, job string, st *lsv1alpha1.ExecutionStatus, now time.Time) time.Duration {
	if v, ok := c.m.LoadAndDelete(key); ok {
		if js := v.(jobStart); js.job == job {
			return now.Sub(js.at)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue {
		return now.Sub(c.LastTransitionTime.Time)
	}
	return -1
}

func (c *jobClock) forget(key types.NamespacedName) { c.m.Delete(key) }
