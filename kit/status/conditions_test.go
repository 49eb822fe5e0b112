package status_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/text"
)

// TestSetCondition: a condition's message is cut to MaxMessage; setting it
// again as it is changes nothing, and lastTransitionTime moves only with the
// status.
func TestSetCondition(t *testing.T) {
	var conds []metav1.Condition
	long := strings.Repeat("x", status.MaxMessage+100)
	if !status.SetCondition(&conds, 3, "Synced", metav1.ConditionFalse, "TooLong", long) {
		t.Fatal("a new condition reported no change")
	}
	c := apimeta.FindStatusCondition(conds, "Synced")
	if len(c.Message) > status.MaxMessage || !strings.HasSuffix(c.Message, text.Ellipsis) {
		t.Errorf("message of %d bytes, want at most %d, ending in %q", len(c.Message), status.MaxMessage, text.Ellipsis)
	}
	if c.ObservedGeneration != 3 || c.Reason != "TooLong" || c.LastTransitionTime.IsZero() {
		t.Errorf("condition %+v", c)
	}
	if !status.Has(conds, "Synced", metav1.ConditionFalse, "TooLong", long) {
		t.Error("Has does not find the condition by its uncut message")
	}
	if status.SetCondition(&conds, 3, "Synced", metav1.ConditionFalse, "TooLong", long) {
		t.Error("setting the same condition again reported a change")
	}

	transition := metav1.NewTime(time.Now().Add(-time.Hour))
	conds[0].LastTransitionTime = transition
	if !status.SetCondition(&conds, 4, "Synced", metav1.ConditionFalse, "Other", "m") {
		t.Error("a new reason reported no change")
	}
	if !conds[0].LastTransitionTime.Equal(&transition) {
		t.Error("lastTransitionTime moved without a change of status")
	}
	if !status.SetReady(&conds, 4, metav1.ConditionTrue, "", "done") {
		t.Error("Ready reported no change")
	}
	if got := status.ReasonOf(conds, status.ConditionReady); got != status.ReasonUnknown {
		t.Errorf("Ready without a reason has reason %q, want %q", got, status.ReasonUnknown)
	}
	if got := status.ReasonOf(conds, "Missing"); got != "" {
		t.Errorf("ReasonOf a missing condition = %q", got)
	}
}

func TestHas(t *testing.T) {
	var conds []metav1.Condition
	status.SetReady(&conds, 1, metav1.ConditionFalse, "Failed", "m")
	for _, c := range []struct {
		typ    string
		st     metav1.ConditionStatus
		reason string
		msg    string
		want   bool
	}{
		{status.ConditionReady, metav1.ConditionFalse, "Failed", "m", true},
		{status.ConditionReady, metav1.ConditionTrue, "Failed", "m", false},
		{status.ConditionReady, metav1.ConditionFalse, "Other", "m", false},
		{status.ConditionReady, metav1.ConditionFalse, "Failed", "other", false},
		{"Synced", metav1.ConditionFalse, "Failed", "m", false},
	} {
		if got := status.Has(conds, c.typ, c.st, c.reason, c.msg); got != c.want {
			t.Errorf("Has(%s, %s, %s, %s) = %v, want %v", c.typ, c.st, c.reason, c.msg, got, c.want)
		}
	}
}

// TestReadyFromError: a stalled or transient error makes Ready False, a
// wait Unknown; the reason is the error's own, else the fallback.
func TestReadyFromError(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		st     metav1.ConditionStatus
		reason string
	}{
		{"stalled", fmt.Errorf("x: %w", flow.Stalledf("InvalidBlueprint", "no blueprint.yaml")), metav1.ConditionFalse, "InvalidBlueprint"},
		{"waiting", fmt.Errorf("x: %w", flow.Waitingf("TargetNotFound", "waiting for Target t")), metav1.ConditionUnknown, "TargetNotFound"},
		{"transient with a reason", flow.TransientError("ClusterUnreachable", errors.New("refused")), metav1.ConditionFalse, "ClusterUnreachable"},
		{"plain error", errors.New("refused"), metav1.ConditionFalse, "ReconcileFailed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var conds []metav1.Condition
			if !status.ReadyFromError(&conds, 2, c.err, "ReconcileFailed") {
				t.Fatal("no change reported")
			}
			if !status.Has(conds, status.ConditionReady, c.st, c.reason, c.err.Error()) {
				t.Errorf("Ready = %+v, want %s, %s, %q", conds, c.st, c.reason, c.err.Error())
			}
		})
	}
}

// TestSetLastError: the same failure again changes nothing (no new
// timestamp on every retry); another message of the same reason keeps
// lastTransitionTime and moves lastUpdateTime; another reason moves both.
// The message is cut to MaxMessage; reason and codes come from the error.
func TestSetLastError(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var le *lsv1alpha1.Error
	err := flow.Stalledf("InvalidImport", "import a: %s", "no such key")
	if !status.SetLastError(&le, t0, "Init", err, "Fallback") {
		t.Fatal("a first error reported no change")
	}
	want := lsv1alpha1.Error{Operation: "Init", Reason: "InvalidImport", Message: "import a: no such key",
		Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}, LastTransitionTime: metav1.NewTime(t0), LastUpdateTime: metav1.NewTime(t0)}
	if !equalError(*le, want) {
		t.Fatalf("lastError = %+v, want %+v", *le, want)
	}

	first := le
	if status.SetLastError(&le, t0.Add(time.Minute), "Init", err, "Fallback") || le != first {
		t.Error("the same failure again changed lastError")
	}

	t2 := t0.Add(2 * time.Minute)
	if !status.SetLastErrorFields(&le, t2, "Init", "InvalidImport", "import b: no such key", lsv1alpha1.ErrorConfigurationProblem) {
		t.Fatal("a new message reported no change")
	}
	if !le.LastTransitionTime.Time.Equal(t0) || !le.LastUpdateTime.Time.Equal(t2) {
		t.Errorf("same reason, new message: transition %v, update %v; want %v, %v", le.LastTransitionTime, le.LastUpdateTime, t0, t2)
	}

	t3 := t0.Add(3 * time.Minute)
	if !status.SetLastError(&le, t3, "Init", errors.New("connection refused"), "ReadFailed") {
		t.Fatal("a new reason reported no change")
	}
	if le.Reason != "ReadFailed" || !slices.Equal(le.Codes, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem}) ||
		!le.LastTransitionTime.Time.Equal(t3) || !le.LastUpdateTime.Time.Equal(t3) {
		t.Errorf("new reason: %+v", le)
	}

	long := strings.Repeat("é", status.MaxMessage)
	status.SetLastErrorFields(&le, t3, "Init", "ReadFailed", long)
	if len(le.Message) > status.MaxMessage || !strings.HasSuffix(le.Message, text.Ellipsis) {
		t.Errorf("message of %d bytes, want at most %d", len(le.Message), status.MaxMessage)
	}
	cut := le
	if status.SetLastErrorFields(&le, t3.Add(time.Minute), "Init", "ReadFailed", long) || le != cut {
		t.Error("the same long message again changed lastError")
	}
}

func equalError(a, b lsv1alpha1.Error) bool {
	return a.Operation == b.Operation && a.Reason == b.Reason && a.Message == b.Message && slices.Equal(a.Codes, b.Codes) &&
		a.LastTransitionTime.Equal(&b.LastTransitionTime) && a.LastUpdateTime.Equal(&b.LastUpdateTime)
}
