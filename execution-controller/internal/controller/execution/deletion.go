package execution

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// handleDeletion runs the deletion flow once the execution has a deletion
// timestamp: InitDelete (a deletion job; delete-without-uninstall passed on)
// → TriggerDelete (items deleted in reverse dependency order) → Deleting
// (waiting) → finalizer removed, or DeleteFailed. A running install job is
// finished first (seed 002); after it the step list ends here.
func (r *Reconciler) handleDeletion(ctx context.Context, s *scope) (flow.Result, error) {
	st := &s.exec.Status
	if s.exec.DeletionTimestamp == nil || (installRunning(st.Phase) && jobid.HasNewJob(st.JobID, st.JobIDFinished)) {
		return flow.Continue(), nil
	}
	if !controllerutil.ContainsFinalizer(s.exec, lsv1alpha1.Finalizer) {
		s.gone = true
		s.status.Skip()
		return flow.Stop(), nil
	}
	res, err := flow.Run(ctx, s, r.startDeletionJob, r.runDeletionJob)
	return res.Merge(flow.Stop()), err
}

// startDeletionJob starts a deletion job when none runs: the one handed
// over (run on in this reconcile), or, for an execution that writes its own
// job ID, a new one (the first, or a retry of a DeleteFailed one on
// operation: reconcile), whose status write brings the next reconcile. An
// owned execution waits for its installation's.
func (r *Reconciler) startDeletionJob(ctx context.Context, s *scope) (flow.Result, error) {
	st := &s.exec.Status
	newJob := jobid.HasNewJob(st.JobID, st.JobIDFinished)
	switch {
	case newJob && deletePhase(st.Phase):
		return flow.Continue(), nil
	case newJob:
		r.beginDeletionJob(ctx, s)
		return flow.Continue(), nil
	case !s.root:
		// The installation controller hands the deletion job over.
		logf.FromContext(ctx).V(1).Info("waiting for the owning installation to hand over a deletion job")
		// No job runs here: this condition is the controller's answer to
		// the object as it is now (its deletion, which moved the
		// generation), so it carries the current generation.
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonWaitingForJob,
			Message: "deletion waits for a job from the owning installation", ObservedGeneration: s.exec.Generation,
		})
		// Re-read the installation now and then: should it go without
		// handing over (its finalizer removed by hand), no event tells this
		// controller, which caches no installations.
		return flow.Stop().RequeueAfter(r.ownerRecheck()), nil
	case st.Phase == lsv1alpha1.PhaseDeleteFailed && operation(s.exec) != lsv1alpha1.OperationReconcile:
		if len(s.items) == 0 {
			// The items went away after all (e.g. removed by hand): nothing
			// is left to delete.
			return flow.Stop(), r.removeFinalizer(ctx, s)
		}
		return flow.Stop(), nil // stays DeleteFailed until operation: reconcile
	}
	// This reconcile's span is the root of the deletion job's trace.
	if err := r.writeOwnTraceContext(ctx, s); err != nil {
		return flow.Stop(), client.IgnoreNotFound(ignoreConflict(err))
	}
	st.JobID = jobid.New()
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(st.JobID))
	if operation(s.exec) == lsv1alpha1.OperationReconcile {
		s.status.AfterStored(r.removeOperation(s, lsv1alpha1.OperationReconcile))
	}
	r.beginDeletionJob(ctx, s)
	return flow.Stop(), nil // the status write brings the next reconcile
}

// runDeletionJob runs the deletion job's phases: InitDelete
// (delete_without_uninstall.go), then TriggerDelete and Deleting; an
// interrupted job stops deleting (stopDeletion).
func (r *Reconciler) runDeletionJob(ctx context.Context, s *scope) (flow.Result, error) {
	if failing(s) {
		return flow.Stop(), r.stopDeletion(ctx, s)
	}
	if s.exec.Status.Phase == lsv1alpha1.PhaseInitDelete {
		if err := r.phaseInitDelete(ctx, s); err != nil {
			return flow.Stop(), client.IgnoreNotFound(err)
		}
	}
	return flow.Stop(), r.phaseTriggerDelete(ctx, s)
}

// phaseTriggerDelete deletes the items in reverse dependency order
// (deletion_order.go): TriggerDelete while some are still to be deleted,
// Deleting once every deletion runs; the finalizer goes with the last item,
// and a failed deletion ends the job DeleteFailed once none runs any more.
func (r *Reconciler) phaseTriggerDelete(ctx context.Context, s *scope) error {
	st := &s.exec.Status
	if len(s.items) == 0 {
		return r.removeFinalizer(ctx, s)
	}
	failed, running, err := r.deleteInOrder(ctx, s, s.items, withoutUninstall(s.exec))
	if err != nil {
		return err
	}
	if len(failed) > 0 && !running {
		logf.FromContext(ctx).Info("deletion failed", "failedItems", failed)
		r.finishJob(s, lsv1alpha1.PhaseDeleteFailed, &lsv1alpha1.Error{
			Operation: OperationDelete, Reason: ReasonDeleteFailed,
			Message: "deleting deploy items failed: " + strings.Join(failed, ", ") + firstCause(s.items, failed),
		})
		return nil
	}
	st.Phase = lsv1alpha1.PhaseDeleting
	for _, di := range s.items {
		if di.DeletionTimestamp == nil {
			st.Phase = lsv1alpha1.PhaseTriggerDelete
		}
	}
	return nil
}

// beginDeletionJob starts the deletion job in status.jobID (InitDelete; the
// status write is guarded).
func (r *Reconciler) beginDeletionJob(ctx context.Context, s *scope) {
	r.beginJob(ctx, s, lsv1alpha1.PhaseInitDelete)
	// Whose job this is stays so until it ends: remembered once the start is
	// written, so the job's reconciles need not read the installation again
	// (ownsDeletion).
	key, job, root := client.ObjectKeyFromObject(s.exec), s.exec.Status.JobID, s.root
	s.status.OnStored(func() { r.deletionJobs.set(key, job, root) })
}

// handedDeletionJob reports whether the execution's job is a deletion job
// that was handed over (status.jobID written by its installation) and has not
// started yet: handleDeletion starts every job handed to a deleted execution
// as a deletion job, unless an install job is still running (it finishes
// first).
func handedDeletionJob(s *scope) bool {
	st := &s.exec.Status
	return s.exec.DeletionTimestamp != nil && jobid.HasNewJob(st.JobID, st.JobIDFinished) &&
		!installRunning(st.Phase) && !deletePhase(st.Phase)
}

// stopDeletion runs a deletion job that was interrupted (marked failing): no
// further item is deleted, and once no deletion is running any more the job
// ends DeleteFailed with the interrupt's lastError, naming the items left -
// or, when none is left, the execution goes as after any deletion. (A
// deletion already running cannot be taken back: the item's deletion
// timestamp is set, and its deployer acts on that alone.)
func (r *Reconciler) stopDeletion(ctx context.Context, s *scope) error {
	var deleting, left []string
	for _, n := range sortedKeys(s.items) {
		left = append(left, n)
		if deleteStateOf(s.items[n]) == deleteRunning {
			deleting = append(deleting, n)
		}
	}
	if len(deleting) > 0 {
		logf.FromContext(ctx).V(1).Info("interrupted deletion job waits for the deletions running", "deleting", deleting)
		return nil
	}
	if len(left) == 0 {
		return r.removeFinalizer(ctx, s)
	}
	le := *s.exec.Status.LastError
	le.Message += "; deploy items left: " + strings.Join(left, ", ") + " (retry the deletion with a new job)"
	logf.FromContext(ctx).Info("interrupted deletion job ended", "itemsLeft", left)
	r.finishJob(s, lsv1alpha1.PhaseDeleteFailed, &le)
	return nil
}
