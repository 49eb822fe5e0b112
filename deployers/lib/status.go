package lib

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/status"
)

// outcome maps a deployer call's result to the status: done → Succeeded,
// pending → the running phase, permanent error (or past the deadline) →
// Failed, other errors → retried with back-off.
func (r *Reconciler) outcome(s *scope, operation string, running lsv1alpha1.Phase, defaultReason string, res Result, err error) {
	dl := r.deadline(s.item)
	pastDeadline := !dl.IsZero() && r.now().After(dl)
	switch {
	case err == nil && !res.Pending:
		if running != lsv1alpha1.PhaseDeleting {
			r.succeed(s, res)
		}
	case err == nil && running == lsv1alpha1.PhaseDeleting && pastDeadline:
		// Nobody aborts a deletion (the execution controller's progressing
		// timeout is for install jobs): one that is still pending at its
		// deadline fails, and the execution reports DeleteFailed.
		msg := "the deletion did not finish within its timeout"
		if res.Message != "" {
			msg += ": " + res.Message
		}
		r.fail(s, operation, ReasonTimeout, msg, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout})
	case err == nil:
		r.pending(s, running, res, dl)
	default:
		reason, msg, codes := toLastError(defaultReason, err)
		if IsPermanent(err) || pastDeadline {
			if !IsPermanent(err) {
				codes = append(codes, lsv1alpha1.ErrorTimeout)
			}
			r.fail(s, operation, reason, msg, codes)
			return
		}
		r.retry(s, operation, running, reason, msg, codes, dl)
	}
}

// succeed ends the job Succeeded.
func (r *Reconciler) succeed(s *scope, res Result) {
	di := s.item
	di.Status.LastError = nil
	r.finish(s, lsv1alpha1.PhaseSucceeded)
	msg := res.Message
	if msg == "" {
		msg = "job " + di.Status.JobID + " succeeded"
	}
	setReady(s, metav1.ConditionTrue, ReasonSucceeded, msg)
}

// pending keeps the item in the running phase. Pending work is bounded by
// the deployer itself (it gets the deadline in the Request): the mock's
// "Progressing" must stay pending until the execution controller aborts it.
func (r *Reconciler) pending(s *scope, running lsv1alpha1.Phase, res Result, dl time.Time) {
	s.item.Status.Phase = running
	setReady(s, metav1.ConditionFalse, string(running), res.Message)
	s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: res.RequeueAfter})
	if running == lsv1alpha1.PhaseDeleting && !dl.IsZero() {
		// Back at the deadline at the latest, to end the deletion there.
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: max(dl.Sub(r.now())+100*time.Millisecond, 100*time.Millisecond)})
	}
}

// retry stays in the running phase, reports the error and backs off: 1s,
// doubling with the time the same reason has lasted, at most 1m, and no
// later than the deadline.
func (r *Reconciler) retry(s *scope, operation string, running lsv1alpha1.Phase, reason, msg string, codes []lsv1alpha1.ErrorCode, dl time.Time) {
	s.item.Status.Phase = running
	backoff := minBackoff
	if le := s.prevError(); le != nil && le.Reason == reason {
		backoff = min(max(2*r.now().Sub(le.LastTransitionTime.Time), minBackoff), maxBackoff)
	}
	if !dl.IsZero() {
		backoff = min(backoff, max(time.Until(dl), 100*time.Millisecond))
	}
	r.setError(s, operation, reason, msg, codes)
	s.log.Info("retrying after error", "operation", operation, "reason", reason, "error", msg, "after", backoff)
	s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: backoff})
}

// finish ends the job: final phase and jobIDFinished in one write.
func (r *Reconciler) finish(s *scope, phase lsv1alpha1.Phase) {
	di := s.item
	di.Status.Phase = phase
	di.Status.JobIDFinished = di.Status.JobID
	if phase == lsv1alpha1.PhaseSucceeded && (s.started || s.orig.Status.Phase != lsv1alpha1.PhaseSucceeded) {
		r.event(s, corev1.EventTypeNormal, ReasonSucceeded, "job %s succeeded", di.Status.JobID)
	}
	// A job (Init, Progressing) ends; a failed deletion is no job.
	if p := s.orig.Status.Phase; s.started || p == lsv1alpha1.PhaseInit || p == lsv1alpha1.PhaseProgressing {
		key, job, now := client.ObjectKeyFromObject(di), di.Status.JobID, r.now()
		var fallback time.Time
		if di.Status.LastReconcileTime != nil {
			fallback = di.Status.LastReconcileTime.Time
		}
		s.reports = append(s.reports, func() {
			r.metrics.JobFinished(string(phase), r.clock.Finish(key, job, fallback, now))
		})
	}
}

// fail ends the job Failed with lastError; besides the event of the error
// (its reason) it emits the transition: Failed, or DeleteFailed for a
// deletion.
func (r *Reconciler) fail(s *scope, operation, reason, message string, codes []lsv1alpha1.ErrorCode) {
	switch {
	case operation == OperationDelete:
		// Every failed deletion says how to go on (the finalizer stays
		// until one of the two happens).
		message += deleteFailedHint
	case reason == ReasonTargetNotFound && s.item.Spec.Target != nil:
		// The item's Target is missing (without spec.target, the reason says
		// the item's type needs one: no Target to create). The job has
		// ended: a Target created now does not restart it.
		message += missingTargetHint
	}
	r.finish(s, lsv1alpha1.PhaseFailed)
	r.setError(s, operation, reason, message, codes)
	transition := ReasonFailed
	if operation == OperationDelete {
		transition = ReasonDeleteFailed
	}
	if transition != reason && (s.started || s.orig.Status.Phase != lsv1alpha1.PhaseFailed) {
		r.event(s, corev1.EventTypeWarning, transition, "job %s ended Failed (%s)", s.item.Status.JobID, reason)
	}
}

// setError records lastError; an unchanged error keeps its times, so
// repeating it writes nothing. Not status.SetLastErrorFields: that cuts the
// message's end, and the end of a deployer's message says how to go on
// (statusMessage keeps it).
func (r *Reconciler) setError(s *scope, operation, reason, message string, codes []lsv1alpha1.ErrorCode) {
	di := s.item
	message = statusMessage(message)
	now := metav1.NewTime(r.now())
	prev := s.prevError()
	if prev != nil && prev.Operation == operation && prev.Reason == reason && prev.Message == message && slices.Equal(prev.Codes, codes) {
		di.Status.LastError = prev.DeepCopy()
	} else {
		le := &lsv1alpha1.Error{Operation: operation, Reason: reason, Message: message, Codes: codes, LastTransitionTime: now, LastUpdateTime: now}
		if prev != nil && prev.Reason == reason {
			le.LastTransitionTime = prev.LastTransitionTime
		}
		di.Status.LastError = le
		r.event(s, corev1.EventTypeWarning, reason, "%s: %s", operation, message)
	}
	setReady(s, metav1.ConditionFalse, reason, message)
}

// setReady sets the Ready condition of the item, its message bounded as
// lastError's is.
func setReady(s *scope, st metav1.ConditionStatus, reason, message string) {
	status.SetReady(&s.item.Status.Conditions, s.item.Generation, st, reason, statusMessage(message))
}

// prevError is the lastError of the job this reconcile works on as the
// reconcile found it: none when the reconcile started the job.
func (s *scope) prevError() *lsv1alpha1.Error {
	if s.started {
		return nil
	}
	return s.orig.Status.LastError
}
