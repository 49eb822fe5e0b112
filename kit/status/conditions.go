package status

import (
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/text"
)

// MaxMessage bounds a condition's or lastError's message (the CRD schemas
// of metav1.Condition allow 32768 bytes).
const MaxMessage = 32768

// ConditionReady is the condition every Terrace object reports.
const ConditionReady = "Ready"

// ReasonUnknown is written when a caller names no reason (a condition
// needs one).
const ReasonUnknown = "Unknown"

// SetCondition sets condition typ on conds, observed at generation, with the
// message cut to MaxMessage, and reports whether anything changed.
// lastTransitionTime moves only when the status changes.
func SetCondition(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) bool {
	if reason == "" {
		reason = ReasonUnknown
	}
	return apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            text.Shorten(message, MaxMessage),
		ObservedGeneration: generation,
	})
}

// SetReady is SetCondition of the Ready condition.
func SetReady(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) bool {
	return SetCondition(conds, generation, ConditionReady, status, reason, message)
}

// Has reports whether conds hold condition typ exactly as SetCondition
// would write it.
func Has(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string) bool {
	c := apimeta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == status && c.Reason == reason && c.Message == text.Shorten(message, MaxMessage)
}

// ReasonOf is the reason of condition typ, empty when it is not set.
func ReasonOf(conds []metav1.Condition, typ string) string {
	if c := apimeta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

// ReadyFromError sets Ready for a reconcile that ended with err, by the
// taxonomy of package flow: a stalled or transient error makes Ready False,
// a wait makes it Unknown; the reason is err's own, or fallback. A nil err
// changes nothing.
func ReadyFromError(conds *[]metav1.Condition, generation int64, err error, fallback string) bool {
	if err == nil {
		return false
	}
	status := metav1.ConditionFalse
	if flow.IsWaiting(err) {
		status = metav1.ConditionUnknown
	}
	return SetReady(conds, generation, status, flow.ReasonOf(err, fallback), err.Error())
}

// SetLastError records a failure of operation in *le, the Landscaper
// lastError, and reports whether it changed. The same failure again (same
// operation, reason, message and codes) changes nothing, so that a retry does not
// write a new timestamp every time. Reason and codes come from err (package
// flow's taxonomy), else fallback and ERR_INTERNAL_PROBLEM.
func SetLastError(le **lsv1alpha1.Error, now time.Time, operation string, err error, fallback string) bool {
	return SetLastErrorFields(le, now, operation, flow.ReasonOf(err, fallback), err.Error(), flow.CodesOf(err)...)
}

// SetLastErrorFields is SetLastError from its fields.
func SetLastErrorFields(le **lsv1alpha1.Error, now time.Time, operation, reason, message string, codes ...lsv1alpha1.ErrorCode) bool {
	message = text.Shorten(message, MaxMessage)
	if prev := *le; prev != nil && prev.Operation == operation && prev.Reason == reason && prev.Message == message && slices.Equal(prev.Codes, codes) {
		return false
	}
	t := metav1.NewTime(now)
	e := &lsv1alpha1.Error{Operation: operation, Reason: reason, Message: message, Codes: codes, LastTransitionTime: t, LastUpdateTime: t}
	if prev := *le; prev != nil && prev.Reason == reason {
		e.LastTransitionTime = prev.LastTransitionTime
	}
	*le = e
	return true
}
