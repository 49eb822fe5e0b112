package execution

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

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
	s.status.Guard()
	job := st.JobID
	s.status.OnStored(func() {
		r.metrics.JobFinished(string(phase), took)
		if lastErr != nil && reason != transition && reason != ReasonInterrupted {
			r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, reason, "FinishJob", "%s", msg)
		}
		r.Recorder.Eventf(s.exec, nil, eventType, transition, "FinishJob", "job %s ended %s: %s", job, phase, msg)
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
