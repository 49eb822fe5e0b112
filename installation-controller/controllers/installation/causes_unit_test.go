package installation

import (
	"strings"
	"testing"
	"unicode/utf8"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// The cause quoted from a failed sub-object is its first line, at most
// maxCauseMessage runes, cut with "…".
func TestSubObjectsFailedMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	msg := subObjectsFailedMessage([]subObjectFailure{
		{kind: "execution", name: "x", phase: lsv1alpha1.PhaseFailed, lastError: &lsv1alpha1.Error{Reason: "DeployItemsFailed", Message: long}},
		{kind: "sub-installation", name: "b", phase: lsv1alpha1.PhaseFailed, lastError: &lsv1alpha1.Error{Reason: ReasonPredecessorFailed, Message: "predecessor a failed"}},
		{kind: "sub-installation", name: "a", phase: lsv1alpha1.PhaseFailed, lastError: &lsv1alpha1.Error{Reason: "TemplateFailed", Message: "execution \"d\" (blueprint.yaml, line 8): render failed: boom\n>    8 | {{ fail }}"}},
	})
	want := `sub-objects failed: sub-installation a (Failed), sub-installation b (Failed), execution x (Failed); cause: sub-installation a: TemplateFailed: execution "d" (blueprint.yaml, line 8): render failed: boom …`
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
	msg = subObjectsFailedMessage([]subObjectFailure{
		{kind: "execution", name: "x", phase: lsv1alpha1.PhaseFailed, lastError: &lsv1alpha1.Error{Reason: "DeployItemsFailed", Message: long}},
	})
	_, cause, _ := strings.Cut(msg, ": DeployItemsFailed: ")
	if n := utf8.RuneCountInString(cause); n != maxCauseMessage || !strings.HasSuffix(cause, "é…") {
		t.Errorf("cause has %d runes (want %d, ending in \"…\"): %q", n, maxCauseMessage, cause)
	}
	// Without a lastError, only the names.
	msg = subObjectsFailedMessage([]subObjectFailure{{kind: "execution", name: "x", phase: lsv1alpha1.PhaseFailed}})
	if msg != "sub-objects failed: execution x (Failed)" {
		t.Errorf("message %q", msg)
	}
}

// A failed deletion quotes the cause like a failed install does, ends with
// the advice to fix it first, and a sub-installation's cause reaches its
// parent without the advice (said once, at the end).
func TestSubObjectsDeleteFailedMessage(t *testing.T) {
	itemMsg := `deleting deploy items failed: cm; cm: TargetNotFound: spec.target: Target ns/t not found; ... or annotate the item with ` +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" to delete it without uninstalling`
	child := subObjectsDeleteFailedMessage([]subObjectFailure{
		{kind: "execution", name: "a", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: itemMsg}},
	})
	want := "deleting sub-objects failed: execution a (DeleteFailed); cause: execution a: DeleteFailed: " + itemMsg + deleteRetryAdvice
	if child != want {
		t.Errorf("message\n%s\nwant\n%s", child, want)
	}
	root := subObjectsDeleteFailedMessage([]subObjectFailure{
		{kind: "sub-installation", name: "a", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: ReasonDeleteFailed, Message: child}},
	})
	want = "deleting sub-objects failed: sub-installation a (DeleteFailed); cause: sub-installation a → execution a: DeleteFailed: " + itemMsg + deleteRetryAdvice
	if root != want {
		t.Errorf("message\n%s\nwant\n%s", root, want)
	}
	// Bounded: the cause is cut, the advice is whole.
	long := subObjectsDeleteFailedMessage([]subObjectFailure{
		{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: strings.Repeat("é", 1000)}},
	})
	_, cause, _ := strings.Cut(strings.TrimSuffix(long, deleteRetryAdvice), ": DeleteFailed: ")
	if n := utf8.RuneCountInString(cause); n != maxDeleteCauseMessage || !strings.HasSuffix(cause, "é…") {
		t.Errorf("cause has %d runes (want %d, ending in \"…\"): %q", n, maxDeleteCauseMessage, cause)
	}
}

// A hand-deleted sub-object's failed deletion is quoted like any failed
// deletion, so the parent of the installation that failed with it finds the
// cause behind the marker (without the advice); an object without a
// lastError is only named.
func TestHandDeletionFailedMessagePassesTheCauseUp(t *testing.T) {
	item := "deleting deploy items failed: item; item: TargetNotFound: target cluster not found"
	msg := handDeletionFailedMessage("execution x", subObjectFailure{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed,
		lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: item}})
	want := "execution x was deleted by hand and its deletion failed; cause: execution x: DeleteFailed: " + item + deleteRetryAdvice
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
	up := subObjectsFailedMessage([]subObjectFailure{{kind: "sub-installation", name: "a", phase: lsv1alpha1.PhaseFailed,
		lastError: &lsv1alpha1.Error{Reason: ReasonDeleteFailed, Message: msg}}})
	if want := "sub-objects failed: sub-installation a (Failed); cause: sub-installation a → execution x: DeleteFailed: " + item; up != want {
		t.Errorf("parent's message\n%s\nwant\n%s", up, want)
	}
	msg = handDeletionFailedMessage("execution x", subObjectFailure{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed})
	if want := "execution x was deleted by hand and its deletion failed (see its status); the next job retries it"; msg != want {
		t.Errorf("without a lastError: %s", msg)
	}
}
