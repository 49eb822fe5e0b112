package execution

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Condition types and reasons (metav1.Conditions on the execution, and the
// reasons of Events, so `kubectl get events --field-selector reason=...` works).
const (
	// ConditionProgressing is True while a job runs; its lastTransitionTime is
	// the job's start (which is also how the job-duration metric survives a
	// controller restart).
	ConditionProgressing = "Progressing"

	ReasonJobStarted          = "JobStarted"
	ReasonSucceeded           = "Succeeded"
	ReasonFailed              = "Failed"
	ReasonDeployItemsFailed   = "DeployItemsFailed"
	ReasonCyclicDependencies  = "CyclicDependencies"
	ReasonUnknownDependencies = "UnknownDependencies"
	ReasonInterrupted         = lsv1alpha1.ReasonInterrupted
	ReasonOrphanDeleteFailed  = "OrphanDeletionFailed"
	ReasonExportsFailed       = "ExportsFailed"
	ReasonDeleteFailed        = "DeleteFailed"
	ReasonDeleted             = "Deleted"
	ReasonReconcileIgnored    = "ReconcileIgnored"
	// ReasonInterruptIgnored: operation: interrupt while no job runs.
	ReasonInterruptIgnored   = "InterruptIgnored"
	ReasonReconcilePostponed = "ReconcilePostponed"
	ReasonWaitingForJob      = "WaitingForJob"
	// ReasonDependenciesRemoved: items of a job cannot start because an item
	// they depend on left the spec mid-job before the job could create it.
	ReasonDependenciesRemoved = "DependenciesRemoved"

	EventItemDeleted = "DeployItemDeleted"
)

// OperationReconcile is lastError.operation for failures of the install flow;
// OperationDelete for the deletion flow.
const (
	OperationReconcile = "Reconcile"
	OperationDelete    = "Delete"
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

func operation(o client.Object) lsv1alpha1.Operation {
	return lsv1alpha1.Operation(o.GetAnnotations()[lsv1alpha1.OperationAnnotation])
}

// removeOperation removes the operation annotation if it still holds op, once
// the status write that acted on it has succeeded.
func (r *Reconciler) removeOperation(s *scope, op lsv1alpha1.Operation) func(context.Context) error {
	return func(ctx context.Context) error {
		if operation(s.exec) != op {
			return nil
		}
		return patch.Annotations(ctx, r.Client, r.FieldManager, s.exec, "",
			map[string]*string{lsv1alpha1.OperationAnnotation: nil})
	}
}

// ensureFinalizer keeps the execution until its items are gone. The patch
// carries the resourceVersion, so it cannot drop a finalizer someone else
// added meanwhile.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.exec.DeletionTimestamp != nil || controllerutil.ContainsFinalizer(s.exec, lsv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	base := s.exec.DeepCopy()
	controllerutil.AddFinalizer(s.exec, lsv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, s.exec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(r.FieldManager)); err != nil {
		return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
	}
	// The patch response carries the server's status; keep ours.
	s.exec.Status = *base.Status.DeepCopy()
	return ctrl.Result{}, nil
}

// handleInterrupt implements operation: interrupt (seed 002) on the running
// job; the annotation is removed once what it caused is written.
//   - An install job: every item still running it ends Failed with
//     jobIDFinished = jobID and a lastError saying so; the job ends Failed
//     the same way. An item the cache shows from before this controller's
//     own hand-over runs the job too: the interrupt waits for its event.
//   - A deletion job: a deletion cannot be taken back (the item's deletion
//     timestamp is set, and its deployer acts on that alone), so the
//     interrupt stops the job from deleting further items and the job ends
//     DeleteFailed (Interrupted, naming the items left) once the deletions
//     already running have ended (handleDeletion) - or, when that left no
//     item, the execution goes as after any deletion. A deletion job handed
//     over and not started yet is started first, then stopped alike.
//   - No job: nothing to interrupt; the annotation is removed (Normal event).
func (r *Reconciler) handleInterrupt(ctx context.Context, s *scope) (ctrl.Result, error) {
	if operation(s.exec) != lsv1alpha1.OperationInterrupt {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	st := &s.exec.Status
	job := st.JobID
	// Removed once what the interrupt caused is written (queued on the
	// paths that succeed: a failed item write keeps it for the retry).
	remove := r.removeOperation(s, lsv1alpha1.OperationInterrupt)
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		s.afterStatus = append(s.afterStatus, remove)
		log.Info("operation: interrupt with no job running; removed")
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonInterruptIgnored, "Interrupt",
			"operation: interrupt has no effect: no job is running; removed")
		s.done = true
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("job %s was interrupted by operation: interrupt on execution %s", job, s.exec.Name)
	if handedDeletionJob(s) {
		// A deletion job handed over but not started (the interrupt came
		// with it or right after it): it is started here, as handleDeletion
		// would, so that it is interrupted as any deletion job is - before
		// it deleted anything, and ending DeleteFailed, not Failed.
		r.beginDeletionJob(s)
	}
	if deletePhase(st.Phase) {
		s.afterStatus = append(s.afterStatus, remove)
		if st.LastError != nil && st.LastError.Reason == ReasonInterrupted {
			return ctrl.Result{}, nil // marked already (a stale copy still shows the annotation)
		}
		r.markFailing(ctx, s, ReasonInterrupted, msg, lsv1alpha1.ErrorInterrupted)
		s.guardStatus = true
		log.Info("deletion job interrupted; no further deploy item is deleted")
		s.afterStatus = append(s.afterStatus, func(context.Context) error {
			r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonInterrupted, "Interrupt",
				"deletion job %s interrupted: no further deploy items are deleted; deletions already running end first", job)
			return nil
		})
		// handleDeletion ends the job (now, or once the running deletions ended).
		return ctrl.Result{}, nil
	}
	for _, name := range sortedKeys(s.items) {
		if di := s.items[name]; r.handedOver.Stale(client.ObjectKeyFromObject(di), di.ResourceVersion) {
			// This controller has just handed the job to the item, and the
			// cache still shows the copy from before: the item runs the job,
			// but failing it needs its current version (the write is guarded
			// by it). The hand-over's watch event brings the next reconcile,
			// which interrupts it; until then nothing else happens (no
			// further item is handed the job).
			log.V(1).Info("interrupt waits for the cache to show a hand-over", "item", name, "deployItem", di.Name)
			s.done = true
			return ctrl.Result{}, nil
		}
	}
	var interrupted []string
	for _, name := range sortedKeys(s.items) {
		di := s.items[name]
		if stateOf(di, job) != stateRunning {
			continue
		}
		if err := patch.FailItem(ctx, r.Client, r.FieldManager, di, lsv1alpha1.Error{
			Operation: lsv1alpha1.OperationInterrupted,
			Reason:    lsv1alpha1.ReasonInterrupted,
			Message:   msg,
			Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted},
		}, r.Now()); err != nil {
			return ctrl.Result{}, err
		}
		// An item no deployer picked up keeps no pickup stamp: its job is
		// over, and the pickup timeout must not overwrite "Interrupted".
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", map[string]*string{lsv1alpha1.ReconcileTimeAnnotation: nil}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		interrupted = append(interrupted, name)
	}
	r.finishJob(s, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{
		Operation: lsv1alpha1.OperationInterrupted,
		Reason:    lsv1alpha1.ReasonInterrupted,
		Message:   msg,
		Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted},
	})
	s.afterStatus = append(s.afterStatus, remove)
	log.Info("job interrupted", "interruptedItems", interrupted)
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonInterrupted, "Interrupt",
		"job %s interrupted; %d running deploy items set to Failed", job, len(interrupted))
	s.done = true
	return ctrl.Result{}, nil
}

// handleReconcileOperation starts a job on operation: reconcile for an
// execution no installation owns. On an owned execution the annotation has no
// effect and is removed; while a job runs it is postponed (seed 002).
func (r *Reconciler) handleReconcileOperation(ctx context.Context, s *scope) (ctrl.Result, error) {
	if operation(s.exec) != lsv1alpha1.OperationReconcile {
		return ctrl.Result{}, nil
	}
	st := &s.exec.Status
	if !isRoot(s.exec) {
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonReconcileIgnored, "Reconcile",
			"operation: reconcile has no effect on an execution owned by an installation; removed")
		return ctrl.Result{}, r.removeOperation(s, lsv1alpha1.OperationReconcile)(ctx)
	}
	if jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		logf.FromContext(ctx).V(1).Info("operation: reconcile postponed until the running job finishes")
		return ctrl.Result{}, nil
	}
	// This reconcile's span is the root of the job's trace (written before
	// the job starts; a conflict means the cache was stale).
	if err := r.writeOwnTraceContext(ctx, s); err != nil {
		s.done = true
		return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
	}
	st.JobID = jobid.New()
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(st.JobID))
	r.beginJob(s, lsv1alpha1.PhaseInit)
	// Guarded: a stale cache showing the annotation after it was handled
	// must not start a second job.
	s.guardStatus = true
	s.afterStatus = append(s.afterStatus, r.removeOperation(s, lsv1alpha1.OperationReconcile))
	logf.FromContext(ctx).Info("job started by operation: reconcile", "newJobID", st.JobID)
	// The status write triggers the next reconcile, which runs the job.
	s.done = true
	return ctrl.Result{}, nil
}

// ignoreConflict drops a conflict: the newer version of the object brings
// the next reconcile.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// beginJob resets the status for the job in status.jobID. The job takes the
// spec as it is now: status.observedGeneration records that generation, and
// every condition the job writes carries it until the next job starts - not
// metadata.generation, which a spec edited mid-job moves on while the edit
// waits for the next job. An install job also records its item set, the
// spec's items now, in status.deployItemRefs (in this same job-start
// write): the job runs those items, however the spec changes while it runs.
func (r *Reconciler) beginJob(s *scope, phase lsv1alpha1.Phase) {
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
	s.guardStatus = true
	job, started := st.JobID, r.Now()
	// No event: a job start is no outcome (the trace, the log line and
	// terrace_jobs_started_total record it); events are for outcomes and problems.
	s.afterStatus = append(s.afterStatus, func(ctx context.Context) error {
		r.clock.Start(client.ObjectKeyFromObject(s.exec), job, started)
		r.metrics.JobStarted()
		logf.FromContext(ctx).V(1).Info("job started", "startedJobID", job, "phase", phase)
		return nil
	})
}

// finishJob ends the current job in a final phase. Once written, it emits
// the transition event (Succeeded, Failed or DeleteFailed) and, for a
// failure, the event of its cause (lastError.reason, e.g. DeployItemsFailed;
// an interrupt has its own event already).
func (r *Reconciler) finishJob(s *scope, phase lsv1alpha1.Phase, lastErr *lsv1alpha1.Error) {
	st := &s.exec.Status
	now := metav1.NewTime(r.Now())
	took := r.clock.Finish(client.ObjectKeyFromObject(s.exec), st.JobID, jobStartTime(st), now.Time)
	st.Phase = phase
	st.JobIDFinished = st.JobID
	if lastErr != nil {
		lastErr.LastTransitionTime, lastErr.LastUpdateTime = now, now
	}
	st.LastError = lastErr
	reason, msg, ready := ReasonSucceeded, "job "+st.JobID+" succeeded", metav1.ConditionTrue
	if lastErr != nil {
		reason, msg, ready = lastErr.Reason, lastErr.Message, metav1.ConditionFalse
	}
	// The outcome is the job's: it describes the generation the job started
	// with, even when the spec was edited since (that edit waits for the next job).
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: st.ObservedGeneration,
	})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: lsv1alpha1.ConditionReady, Status: ready, Reason: reason, Message: msg,
		ObservedGeneration: st.ObservedGeneration,
	})
	transition, eventType := ReasonSucceeded, corev1.EventTypeNormal
	switch phase {
	case lsv1alpha1.PhaseFailed:
		transition, eventType = ReasonFailed, corev1.EventTypeWarning
	case lsv1alpha1.PhaseDeleteFailed:
		transition, eventType = ReasonDeleteFailed, corev1.EventTypeWarning
	}
	// Guarded and reported only once written: a reconcile working from a
	// stale copy (the cache not yet showing this very end) conflicts instead
	// of ending the job twice (no duplicate event, no duplicate metric).
	s.guardStatus = true
	job := st.JobID
	s.afterStatus = append(s.afterStatus, func(context.Context) error {
		r.metrics.JobFinished(string(phase), took)
		if lastErr != nil && reason != transition && reason != ReasonInterrupted {
			r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, reason, "FinishJob", "%s", msg)
		}
		r.Recorder.Eventf(s.exec, nil, eventType, transition, "FinishJob", "job %s ended %s: %s", job, phase, msg)
		return nil
	})
}

// markFailing records why the running job will fail in status.lastError
// while items of the job still run (a job's lastError is cleared when it
// starts, so one set while it runs marks it failing): no further item starts
// or is deleted, and the job ends with this error once none runs any more.
func (r *Reconciler) markFailing(ctx context.Context, s *scope, reason, msg string, code lsv1alpha1.ErrorCode) {
	op := OperationReconcile
	if deletePhase(s.exec.Status.Phase) {
		op = OperationDelete
	}
	if reason == ReasonInterrupted {
		op = lsv1alpha1.OperationInterrupted
	}
	logf.FromContext(ctx).Info("job failing; waiting for its running deploy items", "reason", reason, "message", msg)
	now := metav1.NewTime(r.Now())
	le := &lsv1alpha1.Error{Operation: op, Reason: reason, Message: msg, LastTransitionTime: now, LastUpdateTime: now}
	if code != "" {
		le.Codes = []lsv1alpha1.ErrorCode{code}
	}
	s.exec.Status.LastError = le
}

// failing reports whether the running job was marked failing (markFailing).
func failing(s *scope) bool { return s.exec.Status.LastError != nil }

func (r *Reconciler) failJob(ctx context.Context, s *scope, operation, reason, msg string, code lsv1alpha1.ErrorCode) {
	logf.FromContext(ctx).Info("job failed", "reason", reason, "message", msg)
	le := &lsv1alpha1.Error{Operation: operation, Reason: reason, Message: msg}
	if code != "" {
		le.Codes = []lsv1alpha1.ErrorCode{code}
	}
	r.finishJob(s, lsv1alpha1.PhaseFailed, le)
}

// startJob notices a job handed to the execution (status.jobID moved while
// the previous one had finished) and starts it in phase Init.
func (r *Reconciler) startJob(_ context.Context, s *scope) (ctrl.Result, error) {
	st := &s.exec.Status
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) || installRunning(st.Phase) {
		return ctrl.Result{}, nil
	}
	r.beginJob(s, lsv1alpha1.PhaseInit)
	return ctrl.Result{}, nil
}

// runJob advances the install flow: Init (validate, create/update items) →
// CleanupOrphaned → Progressing (hand the job to items in dependency order)
// → Completing (exports) → Succeeded, or Failed.
func (r *Reconciler) runJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	st := &s.exec.Status
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		return ctrl.Result{}, nil
	}
	job := st.JobID
	g := specGraph(s.exec)
	// Validated on every step, not only in Init: a spec edited mid-job
	// must not leave the job waiting on items that can never start.
	if err := g.Validate(); err != nil {
		// The job fails because of the spec as it is now, which this
		// reconcile did act on: the status describes that generation (newer
		// than the job's when the spec was edited mid-job).
		st.ObservedGeneration = s.exec.Generation
		var cyc *depgraph.CycleError
		if errors.As(err, &cyc) {
			r.failJob(ctx, s, OperationReconcile, ReasonCyclicDependencies, err.Error(), lsv1alpha1.ErrorCyclicDependencies)
		} else {
			r.failJob(ctx, s, OperationReconcile, ReasonUnknownDependencies, err.Error(), lsv1alpha1.ErrorConfigurationProblem)
		}
		return ctrl.Result{}, nil
	}

	if st.Phase == lsv1alpha1.PhaseInit {
		if len(st.DeployItemReferences) == 0 {
			// No item set recorded (a job started by a controller version
			// that recorded none at the start, or the spec had no items
			// then): the spec as it is now is the set, rather than treating
			// every existing item as an orphan to delete.
			st.DeployItemReferences = specItemRefs(s.exec)
		}
		pctx, span := startPhase(ctx, lsv1alpha1.PhaseInit)
		err := r.syncItems(pctx, s, false)
		if err == nil {
			// Orphans whose deletion failed (in an earlier job) are asked
			// to retry it, once per job, as a deletion job does (InitDelete).
			err = r.retryFailedOrphans(pctx, s)
		}
		wait, err := nameWait(err)
		tracing.EndStep(span, err)
		if wait != nil {
			return r.waitForName(ctx, s, wait), nil
		}
		if r.failOnConfigProblem(ctx, s, err) {
			return ctrl.Result{}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		st.Phase = lsv1alpha1.PhaseCleanupOrphaned
	}
	if st.Phase == lsv1alpha1.PhaseCleanupOrphaned {
		pctx, span := startPhase(ctx, lsv1alpha1.PhaseCleanupOrphaned)
		done, err := r.cleanupOrphans(pctx, s)
		tracing.EndStep(span, err)
		if err != nil || !done {
			return ctrl.Result{}, err
		}
		st.Phase = lsv1alpha1.PhaseProgressing
	}
	if st.Phase == lsv1alpha1.PhaseProgressing || st.Phase == lsv1alpha1.PhaseObjectsCreated {
		st.Phase = lsv1alpha1.PhaseProgressing
		// The items are handed the job from this span, so the deployers'
		// spans are its children.
		pctx, span := startPhase(ctx, lsv1alpha1.PhaseProgressing)
		// An item of the job deleted by hand mid-job is recreated (with the
		// spec it had at job start or newer), unless its entry left the spec.
		// Not once the job is failing: nothing starts any more.
		var err error
		if st.LastError == nil {
			err = r.syncItems(pctx, s, true)
		}
		var wait *namesakeWait
		if wait, err = nameWait(err); wait != nil {
			// Nothing further starts until the item is created, as before
			// an error; but the job only waits (see namesakeWait).
			tracing.EndStep(span, nil)
			return r.waitForName(ctx, s, wait), nil
		}
		var problem configProblem
		if errors.As(err, &problem) {
			// Like a failed item: no further item starts, and the job ends
			// Failed with it once no item of the job is still running (see
			// progress). Recorded in lastError, which marks the running job
			// as failing across reconciles.
			r.markFailing(ctx, s, problem.reason, problem.Error(), lsv1alpha1.ErrorConfigurationProblem)
			err = nil
		}
		done := false
		if err == nil {
			jg, dropped := jobGraph(s)
			if len(dropped) > 0 {
				logf.FromContext(pctx).V(1).Info("deploy items of the job left the spec before they were created; not created",
					"items", dropped)
			}
			done, err = r.progress(pctx, s, jg, job)
		}
		tracing.EndStep(span, err)
		if r.failOnConfigProblem(ctx, s, err) {
			return ctrl.Result{}, nil
		}
		if err != nil || !done {
			return ctrl.Result{}, err
		}
		st.Phase = lsv1alpha1.PhaseCompleting
	}
	if st.Phase == lsv1alpha1.PhaseCompleting {
		pctx, span := startPhase(ctx, lsv1alpha1.PhaseCompleting)
		wait, err := nameWait(r.gatherExports(pctx, s))
		tracing.EndStep(span, err)
		if wait != nil {
			// The exports DataObject's namesake is being deleted: written
			// once it is gone (see namesakeWait).
			return r.waitForName(ctx, s, wait), nil
		}
		var problem exportProblem
		if errors.As(err, &problem) {
			r.failJob(ctx, s, OperationReconcile, ReasonExportsFailed, problem.Error(), lsv1alpha1.ErrorConfigurationProblem)
			return ctrl.Result{}, nil
		}
		if r.failOnConfigProblem(ctx, s, err) {
			return ctrl.Result{}, nil
		}
		if err != nil {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: lsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonExportsFailed,
				Message: err.Error(), ObservedGeneration: st.ObservedGeneration,
			})
			return ctrl.Result{}, err
		}
		r.finishJob(s, lsv1alpha1.PhaseSucceeded, nil)
		logf.FromContext(ctx).Info("job succeeded")
	}
	return ctrl.Result{}, nil
}

// failOnConfigProblem ends the job Failed (ERR_CONFIGURATION_PROBLEM, the
// problem's reason, lastError, a Warning event) when err is a configProblem:
// a write retrying cannot fix must not stall the job silently. It reports
// whether it did.
func (r *Reconciler) failOnConfigProblem(ctx context.Context, s *scope, err error) bool {
	var problem configProblem
	if !errors.As(err, &problem) {
		return false
	}
	r.failJob(ctx, s, OperationReconcile, problem.reason, problem.Error(), lsv1alpha1.ErrorConfigurationProblem)
	return true
}

// progress hands the job to every item of the job's graph g (see jobGraph)
// whose dependencies have succeeded. Once an item failed no further item
// starts; the job ends Failed when no item runs any more. It reports true
// when every item succeeded. Items that wait for a dependency g does not hold
// (dropped from the job) can never start: once nothing else runs the job
// ends Failed (DependenciesRemoved) rather than wait for ever.
func (r *Reconciler) progress(ctx context.Context, s *scope, g depgraph.Graph, job string) (bool, error) {
	log := logf.FromContext(ctx)
	state := func(n string) itemState { return r.stateOf(s.items[n], job) }
	var failed, running []string
	succeeded := 0
	for _, n := range g.Order() {
		if di := s.items[n]; di != nil && di.Status.JobID == job {
			// The cache shows the hand-over: nothing to remember about it.
			r.handedOver.Forget(client.ObjectKeyFromObject(di))
		}
		switch state(n) {
		case stateFailed:
			failed = append(failed, n)
		case stateRunning:
			running = append(running, n)
		case stateSucceeded:
			succeeded++
		}
	}
	if len(failed) > 0 || failing(s) {
		switch {
		case len(running) > 0:
			log.V(1).Info("waiting for running deploy items before failing", "failed", failed, "running", running)
		case failing(s):
			// The cause recorded first (say a name conflict) is the job's.
			le := *s.exec.Status.LastError
			if len(failed) > 0 {
				le.Message += fmt.Sprintf("; deploy items failed: %s%s", strings.Join(failed, ", "), firstCause(s.items, failed))
			}
			r.finishJob(s, lsv1alpha1.PhaseFailed, &le)
		default:
			// The first failed item's own reason and message (bounded) say
			// why, so the execution's lastError (kubectl get execution -o
			// wide) shows the cause, not only the item's name; its codes
			// (say ERR_TIMEOUT) classify the job's failure alike.
			msg := fmt.Sprintf("deploy items failed: %s%s", strings.Join(failed, ", "), firstCause(s.items, failed))
			log.Info("job failed", "reason", ReasonDeployItemsFailed, "message", msg)
			r.finishJob(s, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{
				Operation: OperationReconcile, Reason: ReasonDeployItemsFailed, Message: msg, Codes: firstCodes(s.items, failed),
			})
		}
		return false, nil
	}
	if succeeded == len(g) {
		return true, nil
	}
	startable := g.Startable(
		func(n string) bool { return state(n) != statePending },
		func(n string) bool { return state(n) == stateSucceeded },
	)
	for _, n := range startable {
		di := s.items[n]
		if di == nil {
			continue // created this reconcile but not readable yet: the next event brings it
		}
		handed, err := r.handOver(ctx, di, job, slices.Contains(s.stamped, n))
		if err != nil {
			return false, err
		}
		if handed {
			log.Info("deploy item started", "item", n, "deployItem", di.Name)
		}
	}
	if len(running) == 0 && len(startable) == 0 {
		// In a valid graph something runs or can start until every item
		// succeeded; here the items left wait for items the job dropped.
		var blocked, missing []string
		for _, n := range g.Order() {
			if state(n) != statePending {
				continue
			}
			blocked = append(blocked, n)
			for _, d := range g[n] {
				if _, ok := g[d]; !ok && !slices.Contains(missing, d) {
					missing = append(missing, d)
				}
			}
		}
		sort.Strings(missing)
		r.failJob(ctx, s, OperationReconcile, ReasonDependenciesRemoved,
			fmt.Sprintf("deploy items %s cannot run in job %s: they depend on %s, which left the spec before the job created it",
				strings.Join(blocked, ", "), job, strings.Join(missing, ", ")), lsv1alpha1.ErrorConfigurationProblem)
	}
	return false, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
