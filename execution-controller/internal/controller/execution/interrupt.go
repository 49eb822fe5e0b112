package execution

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// handleInterrupt implements operation: interrupt (seed 002) on the running
// job; the annotation is removed once what it caused is written.
//   - An install job: every item still running it ends Failed with
//     jobIDFinished = jobID and a lastError saying so; the job ends Failed
//     the same way (interruptInstallJob).
//   - A deletion job: a deletion cannot be taken back (the item's deletion
//     timestamp is set, and its deployer acts on that alone), so the
//     interrupt stops the job from deleting further items and the job ends
//     DeleteFailed (Interrupted, naming the items left) once the deletions
//     already running have ended (handleDeletion) - or, when that left no
//     item, the execution goes as after any deletion. A deletion job handed
//     over and not started yet is started first, then stopped alike
//     (interruptDeletionJob).
//   - No job: nothing to interrupt; the annotation is removed (Normal event).
func (r *Reconciler) handleInterrupt(ctx context.Context, s *scope) (flow.Result, error) {
	if operation(s.exec) != lsv1alpha1.OperationInterrupt {
		return flow.Continue(), nil
	}
	st := &s.exec.Status
	if !jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		s.status.AfterStored(r.removeOperation(s, lsv1alpha1.OperationInterrupt))
		logf.FromContext(ctx).Info("operation: interrupt with no job running; removed")
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonInterruptIgnored, "Interrupt",
			"operation: interrupt has no effect: no job is running; removed")
		return flow.Stop(), nil
	}
	if handedDeletionJob(s) {
		// A deletion job handed over but not started (the interrupt came
		// with it or right after it): it is started here, as handleDeletion
		// would, so that it is interrupted as any deletion job is - before
		// it deleted anything, and ending DeleteFailed, not Failed.
		r.beginDeletionJob(ctx, s)
	}
	if deletePhase(st.Phase) {
		r.interruptDeletionJob(ctx, s)
		// handleDeletion ends the job (now, or once the running deletions ended).
		return flow.Continue(), nil
	}
	return r.interruptInstallJob(ctx, s)
}

// interruptMessage is the lastError message of an interrupted job.
func interruptMessage(s *scope) string {
	return fmt.Sprintf("job %s was interrupted by operation: interrupt on execution %s", s.exec.Status.JobID, s.exec.Name)
}

// interruptDeletionJob marks the running deletion job failing: no further
// item is deleted.
func (r *Reconciler) interruptDeletionJob(ctx context.Context, s *scope) {
	st := &s.exec.Status
	// Removed once what the interrupt caused is written.
	s.status.AfterStored(r.removeOperation(s, lsv1alpha1.OperationInterrupt))
	if st.LastError != nil && st.LastError.Reason == ReasonInterrupted {
		return // marked already (a stale copy still shows the annotation)
	}
	r.markFailing(ctx, s, ReasonInterrupted, interruptMessage(s), lsv1alpha1.ErrorInterrupted)
	s.status.Guard()
	logf.FromContext(ctx).Info("deletion job interrupted; no further deploy item is deleted")
	job := st.JobID
	s.status.OnStored(func() {
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonInterrupted, "Interrupt",
			"deletion job %s interrupted: no further deploy items are deleted; deletions already running end first", job)
	})
}

// interruptInstallJob fails every item still running the install job and
// ends the job Failed. An item the cache shows from before this
// controller's own hand-over runs the job too: the interrupt waits for its
// event.
func (r *Reconciler) interruptInstallJob(ctx context.Context, s *scope) (flow.Result, error) {
	log := logf.FromContext(ctx)
	job, msg := s.exec.Status.JobID, interruptMessage(s)
	for _, name := range sortedKeys(s.items) {
		if di := s.items[name]; r.handedOver.Stale(client.ObjectKeyFromObject(di), di.ResourceVersion) {
			// This controller has just handed the job to the item, and the
			// cache still shows the copy from before: the item runs the job,
			// but failing it needs its current version (the write is guarded
			// by it). The hand-over's watch event brings the next reconcile,
			// which interrupts it; until then nothing else happens (no
			// further item is handed the job).
			log.V(1).Info("interrupt waits for the cache to show a hand-over", "item", name, "deployItem", di.Name)
			return flow.Stop(), nil
		}
	}
	interrupted, err := r.interruptItems(ctx, s, job, msg)
	if err != nil {
		// The annotation stays for the retry.
		return flow.Stop(), err
	}
	r.finishJob(s, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{
		Operation: lsv1alpha1.OperationInterrupted,
		Reason:    lsv1alpha1.ReasonInterrupted,
		Message:   msg,
		Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted},
	})
	s.status.AfterStored(r.removeOperation(s, lsv1alpha1.OperationInterrupt))
	log.Info("job interrupted", "interruptedItems", interrupted)
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, ReasonInterrupted, "Interrupt",
		"job %s interrupted; %d running deploy items set to Failed", job, len(interrupted))
	return flow.Stop(), nil
}

// interruptItems ends job Failed (Interrupted) on every item still running
// it, and returns their names.
func (r *Reconciler) interruptItems(ctx context.Context, s *scope, job, msg string) ([]string, error) {
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
			return nil, err
		}
		// An item no deployer picked up keeps no pickup stamp: its job is
		// over, and the pickup timeout must not overwrite "Interrupted".
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", map[string]*string{lsv1alpha1.ReconcileTimeAnnotation: nil}); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		interrupted = append(interrupted, name)
	}
	return interrupted, nil
}
