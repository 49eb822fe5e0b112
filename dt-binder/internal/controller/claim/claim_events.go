package claim

import (
	"k8s.io/apimachinery/pkg/api/meta"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// Event reasons for actions and errors (phase transitions use the Bound
// condition's reason). A claimRef write is not an Event of its own: it is a
// step of the binding, whose outcome the claim's Bound Event (and the
// target's) tells; the write is logged and is the ClaimTarget span.
const (
	EventDeletingTarget = "DeletingTarget"
	EventTargetRetained = "TargetRetained"
	EventClassNotFound  = "ClassNotFound"
	EventFinalized      = "Finalized"
	// EventBindFailed and EventReclaimFailed: a reconcile of a claim (or of
	// a claim being deleted) failed with an error; it is retried with back-off.
	EventBindFailed    = "BindFailed"
	EventReclaimFailed = "ReclaimFailed"
	// EventEarlierClaimTargetDeleted and EventEarlierClaimTargetReleased: a
	// target whose claimRef names the claim was bound (or provisioned) for an
	// earlier claim object of the same name, which is gone (its finalizer
	// was removed by force); its class's reclaimPolicy was applied for that
	// claim: Delete deletes it, Retain clears its claimRef.
	EventEarlierClaimTargetDeleted  = "EarlierClaimTargetDeleted"
	EventEarlierClaimTargetReleased = "EarlierClaimTargetReleased"
	// EventProvisionerChanged: a claim marked for dynamic provisioning, not
	// bound and with no target provisioned for it yet, had its class changed
	// to one of another provisioner; it was marked again for that one.
	EventProvisionerChanged = "ProvisionerChanged"
)

// Event types (corev1.EventTypeNormal/Warning), spelled out to keep k8s.io/api
// out of this package's imports.
const (
	corev1EventNormal  = "Normal"
	corev1EventWarning = "Warning"
)

// report tells the user of a failed reconcile: a Warning Event BindFailed,
// or ReclaimFailed for a claim being deleted. A stalled claim is told by its
// Bound condition's Warning Event (ClassNotFound), not twice.
func (r *Reconciler) report(s *scope, deleting bool) func(error) {
	return func(err error) {
		if flow.IsStalled(err) {
			return
		}
		reason := EventBindFailed
		if deleting {
			reason = EventReclaimFailed
		}
		r.Recorder.Eventf(s.claim, nil, corev1EventWarning, reason, "Bind", "%v", err)
	}
}

// emitTransition emits an Event when the Bound condition changed its reason:
// Normal for outcomes (Bound, DeletingTarget), Warning for problems; the
// waits (Provisioning, WaitingForTarget) are logged only.
func (r *Reconciler) emitTransition(s *scope) {
	now := meta.FindStatusCondition(s.claim.Status.Conditions, appstudiov1alpha1.ConditionBound)
	if now == nil {
		return
	}
	if old := meta.FindStatusCondition(s.before.Status.Conditions, appstudiov1alpha1.ConditionBound); old != nil && old.Reason == now.Reason {
		return
	}
	eventType := corev1EventNormal
	switch now.Reason {
	case appstudiov1alpha1.BindReasonProvisioning, appstudiov1alpha1.BindReasonWaitingForTarget:
		// Not outcomes: the claim's Bound event (and the trace) cover them.
		s.log.Info("claim binding changed", "phase", s.claim.Status.Phase, "reason", now.Reason, "message", now.Message)
		return
	case appstudiov1alpha1.BindReasonBound, appstudiov1alpha1.BindReasonDeletingTarget:
	default:
		eventType = corev1EventWarning
	}
	s.log.Info("claim binding changed", "phase", s.claim.Status.Phase, "reason", now.Reason, "message", now.Message)
	r.Recorder.Eventf(s.claim, nil, eventType, now.Reason, "Bind", "%s", now.Message)
}
