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
