package execution

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// isRoot reports whether no installation owns the execution. Only then does
// this controller write status.jobID (starting jobs on operation: reconcile);
// otherwise the installation controller is that field's only writer.
func isRoot(exec *lsv1alpha1.Execution) bool {
	if _, ok := exec.Labels[lsv1alpha1.EncompassedByLabel]; ok {
		return false
	}
	for _, ref := range exec.OwnerReferences {
		if ref.Kind == "Installation" && strings.HasPrefix(ref.APIVersion, lsv1alpha1.GroupName+"/") {
			return false
		}
	}
	return true
}

func installRunning(p lsv1alpha1.Phase) bool {
	switch p {
	case lsv1alpha1.PhaseInit, lsv1alpha1.PhaseCleanupOrphaned, lsv1alpha1.PhaseObjectsCreated,
		lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseCompleting:
		return true
	}
	return false
}

func deletePhase(p lsv1alpha1.Phase) bool {
	return p == lsv1alpha1.PhaseInitDelete || p == lsv1alpha1.PhaseTriggerDelete || p == lsv1alpha1.PhaseDeleting
}

// handleReconcileOperation starts a job on operation: reconcile for an
// execution no installation owns. On an owned execution the annotation has no
// effect and is removed; while a job runs it is postponed (seed 002).
func (r *Reconciler) handleReconcileOperation(ctx context.Context, s *scope) (flow.Result, error) {
	if operation(s.exec) != lsv1alpha1.OperationReconcile {
		return flow.Continue(), nil
	}
	st := &s.exec.Status
	if !isRoot(s.exec) {
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonReconcileIgnored, "Reconcile",
			"operation: reconcile has no effect on an execution owned by an installation; removed")
		return flow.Continue(), r.removeOperation(s, lsv1alpha1.OperationReconcile)(ctx)
	}
	if jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		logf.FromContext(ctx).V(1).Info("operation: reconcile postponed until the running job finishes")
		return flow.Continue(), nil
	}
	// This reconcile's span is the root of the job's trace (written before
	// the job starts; a conflict means the cache was stale).
	if err := r.writeOwnTraceContext(ctx, s); err != nil {
		return flow.Stop(), client.IgnoreNotFound(ignoreConflict(err))
	}
	st.JobID = jobid.New()
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(st.JobID))
	// Guarded (beginJob): a stale cache showing the annotation after it was
	// handled must not start a second job.
	r.beginJob(ctx, s, lsv1alpha1.PhaseInit)
	s.status.AfterStored(r.removeOperation(s, lsv1alpha1.OperationReconcile))
	logf.FromContext(ctx).Info("job started by operation: reconcile", "newJobID", st.JobID)
	// The status write triggers the next reconcile, which runs the job.
	return flow.Stop(), nil
}

// startJob notices a job handed to the execution (status.jobID moved while
// the previous one had finished) and starts it in phase Init.
func (r *Reconciler) startJob(ctx context.Context, s *scope) (flow.Result, error) {
	st := &s.exec.Status
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) || installRunning(st.Phase) {
		return flow.Continue(), nil
	}
	r.beginJob(ctx, s, lsv1alpha1.PhaseInit)
	return flow.Continue(), nil
}

// beginJob resets the status for the job in status.jobID. The job takes the
// spec as it is now: status.observedGeneration records that generation, and
// every condition the job writes carries it until the next job starts - not
// metadata.generation, which a spec edited mid-job moves on while the edit
// waits for the next job. An install job also records its item set, the
// spec's items now, in status.deployItemRefs (in this same job-start
// write): the job runs those items, however the spec changes while it runs.
func (r *Reconciler) beginJob(ctx context.Context, s *scope, phase lsv1alpha1.Phase) {
	st := &s.exec.Status
	st.Phase = phase
	st.ObservedGeneration = s.exec.Generation
	if phase == lsv1alpha1.PhaseInit {
		st.DeployItemReferences = specItemRefs(s.exec)
	}
	st.LastError = nil
	// Removed first so the transition time is the job's start even when the
	// previous job ended with the same status.
	meta.RemoveStatusCondition(&st.Conditions, ConditionProgressing)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonJobStarted,
		Message: "job " + st.JobID + " started", ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(r.Now()),
	})
	// Guarded: a reconcile working from a stale copy (the cache not yet
	// showing this start) conflicts instead of starting the job twice.
	s.status.Guard()
	job, started := st.JobID, r.Now()
	// No event: a job start is no outcome (the trace, the log line and
	// terrace_jobs_started_total record it); events are for outcomes and problems.
	s.status.OnStored(func() {
		r.clock.Start(client.ObjectKeyFromObject(s.exec), job, started)
		r.metrics.JobStarted()
		logf.FromContext(ctx).V(1).Info("job started", "startedJobID", job, "phase", phase)
	})
}

// validateDependencies checks the spec's dependsOn graph on every reconcile
// of a running job, not only in Init: a spec edited mid-job must not leave
// the job waiting on items that can never start. A cycle or an unknown
// dependency ends the job Failed.
func (r *Reconciler) validateDependencies(ctx context.Context, s *scope) (flow.Result, error) {
	st := &s.exec.Status
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		return flow.Continue(), nil
	}
	err := specGraph(s.exec).Validate()
	if err == nil {
		return flow.Continue(), nil
	}
	// The job fails because of the spec as it is now, which this reconcile
	// did act on: the status describes that generation (newer than the
	// job's when the spec was edited mid-job).
	st.ObservedGeneration = s.exec.Generation
	var cyc *depgraph.CycleError
	if errors.As(err, &cyc) {
		r.failJob(ctx, s, OperationReconcile, ReasonCyclicDependencies, err.Error(), lsv1alpha1.ErrorCyclicDependencies)
	} else {
		r.failJob(ctx, s, OperationReconcile, ReasonUnknownDependencies, err.Error(), lsv1alpha1.ErrorConfigurationProblem)
	}
	return flow.Stop(), nil
}
