package target

import (
	"k8s.io/apimachinery/pkg/api/meta"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

// EventReconcileFailed: a reconcile of a target failed with an error; it is
// retried with back-off. Phase and Terminating transitions use the reason of
// the Bound or Terminating condition.
const EventReconcileFailed = "ReconcileFailed"

// Events of reclaimGoneClaim, on the target: its claim (recorded in
// ClaimAnnotation) was deleted without its finalizer running (removed by
// hand), and the reclaimPolicy of the target's class was applied for it —
// Delete: the target is deleted; Retain: its claimRef is cleared.
// EventClassNotFound (Warning): the class does not exist; the target is
// retained.
const (
	EventClaimForceDeletedTargetDeleted  = "ClaimForceDeletedTargetDeleted"
	EventClaimForceDeletedTargetReleased = "ClaimForceDeletedTargetReleased"
	EventClassNotFound                   = "ClassNotFound"
)

// Events of reclaimForClaimBoundElsewhere, on the target: it was made (or
// claimed) for a claim that got bound to another target (a provisioner's
// target of the claim's old class, arriving after the claim was marked
// again for its new class's and bound that one's target), and the
// reclaimPolicy of its class was applied: Delete deletes it, Retain clears
// its claimRef.
const (
	EventClaimBoundElsewhereTargetDeleted  = "ClaimBoundElsewhereTargetDeleted"
	EventClaimBoundElsewhereTargetReleased = "ClaimBoundElsewhereTargetReleased"
)

// Event types (corev1.EventTypeNormal/Warning).
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// report tells the user of a failed reconcile: a Warning Event ReconcileFailed.
func (r *Reconciler) report(s *scope) func(error) {
	return func(err error) {
		r.Recorder.Eventf(s.target, nil, eventWarning, EventReconcileFailed, "Bind", "%v", err)
	}
}

// emitTransition emits an Event when the phase changed, or — the phase
// unchanged — when the Terminating condition changed its reason.
func (r *Reconciler) emitTransition(s *scope) {
	if s.before.Status.Phase != s.target.Status.Phase {
		r.emitPhase(s)
		return
	}
	now := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionTerminating)
	if now == nil {
		return
	}
	if old := meta.FindStatusCondition(s.before.Status.Conditions, appstudiov1alpha1.ConditionTerminating); old != nil && old.Reason == now.Reason {
		return
	}
	eventType := eventNormal
	if now.Reason == appstudiov1alpha1.TerminatingReasonUnableToTerminate {
		eventType = eventWarning
	}
	s.log.Info("target termination changed", "reason", now.Reason, "message", now.Message)
	r.Recorder.Eventf(s.target, nil, eventType, now.Reason, "Terminate", "%s", now.Message)
}

// emitPhase emits the Event of a phase change: the reason of the Bound
// condition, or of Terminating for Failed (a Warning).
func (r *Reconciler) emitPhase(s *scope) {
	reason, note := string(s.target.Status.Phase), ""
	if c := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionBound); c != nil {
		reason, note = c.Reason, c.Message
	}
	eventType := eventNormal
	if s.target.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseFailed {
		eventType = eventWarning
		if c := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionTerminating); c != nil {
			reason, note = c.Reason, c.Message
		}
	}
	s.log.Info("target phase changed", "from", s.before.Status.Phase, "to", s.target.Status.Phase, "reason", reason)
	r.Recorder.Eventf(s.target, nil, eventType, reason, "Bind", "%s", note)
}
