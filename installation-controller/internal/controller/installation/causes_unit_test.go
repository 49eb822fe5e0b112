package installation

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/text"
)

// The cause quoted from a failed sub-installation is its first line; from
// any sub-object it is at most maxCauseBytes, its middle cut on rune
// boundaries, so that its end survives.
func TestSubObjectsFailedMessageIsBounded(t *testing.T) {
	long := "start " + strings.Repeat("é", 1000) + " the end"
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
	checkCut(t, cause, long, maxCauseBytes)
	// Without a lastError, only the names.
	msg = subObjectsFailedMessage([]subObjectFailure{{kind: "execution", name: "x", phase: lsv1alpha1.PhaseFailed}})
	if msg != "sub-objects failed: execution x (Failed)" {
		t.Errorf("message %q", msg)
	}
}

// checkCut checks that quote is orig cut in its middle to exactly max bytes
// (give or take a rune), on rune boundaries: its start and its last
// causeTail bytes (give or take a rune) are orig's.
func checkCut(t *testing.T, quote, orig string, max int) {
	t.Helper()
	head, tail, ok := strings.Cut(quote, text.Cut)
	switch {
	case !ok:
		t.Errorf("no cut in %q", quote)
	case len(quote) > max || len(quote) < max-2*utf8.UTFMax:
		t.Errorf("quote has %d bytes, want %d: %q", len(quote), max, quote)
	case !utf8.ValidString(quote):
		t.Errorf("quote cut inside a rune: %q", quote)
	case !strings.HasPrefix(orig, head) || !strings.HasSuffix(orig, tail):
		t.Errorf("quote %q is not orig's start and end", quote)
	case len(tail) > causeTail || len(tail) < causeTail-utf8.UTFMax:
		t.Errorf("tail has %d bytes, want %d", len(tail), causeTail)
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
	// Bounded: the cause is cut in its middle, the advice is whole.
	orig := strings.Repeat("é", 1000) + "x"
	long := subObjectsDeleteFailedMessage([]subObjectFailure{
		{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: orig}},
	})
	if !strings.HasSuffix(long, deleteRetryAdvice) {
		t.Errorf("no advice at the end: %q", long)
	}
	_, cause, _ := strings.Cut(strings.TrimSuffix(long, deleteRetryAdvice), ": DeleteFailed: ")
	checkCut(t, cause, orig, maxCauseBytes)
}

// A hand-deleted sub-object's failed deletion is quoted like any failed
// deletion, so the parent of the installation that failed with it finds the
// cause behind the marker (without the advice); an object without a
// lastError is only named.
func TestHandDeletionFailedMessagePassesTheCauseUp(t *testing.T) {
	item := "deleting deploy items failed: item; item: TargetNotFound: target cluster not found"
	msg := handDeletionFailedMessage("execution x", false, subObjectFailure{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed,
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
	msg = handDeletionFailedMessage("execution x", false, subObjectFailure{kind: "execution", name: "x", phase: lsv1alpha1.PhaseDeleteFailed})
	if want := "execution x was deleted by hand and its deletion failed (see its status); the next job retries it"; msg != want {
		t.Errorf("without a lastError: %s", msg)
	}
}

// The bounds hold the execution controller's: an execution's lastError
// message quotes its failed item's message (up to
// executionItemMessageBytes, its middle cut there so that the deployer's way
// out is its end) after the list of failed items and the item's name and
// reason. Quoted by a sub-installation, and passed up a deep tree of long
// names to the root, the message still ends with the execution's quote of
// its item, whole, then the advice; every level is bounded.
func TestQuotedCauseKeepsTheExecutionsQuoteOfItsItem(t *testing.T) {
	wayOut := `; fix the cause and retry the deletion with the annotation landscaper.gardener.cloud/operation: reconcile, or annotate the item with ` +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" to delete it without uninstalling`
	// An item message as the execution quotes it at its bound: a cut
	// start, then the way out.
	itemMsg := "spec.target: Target ns/" + strings.Repeat("ü", 100) + " … " + strings.Repeat("c", 40) + " not found" + wayOut
	itemMsg = itemMsg[:15] + itemMsg[len(itemMsg)-(executionItemMessageBytes-15):]
	if len(itemMsg) != executionItemMessageBytes {
		t.Fatalf("item message has %d bytes", len(itemMsg))
	}
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprintf("%d%s", i, strings.Repeat("n", 62)))
	}
	itemCause := "; " + names[0] + ": " + strings.Repeat("R", 64) + ": " + itemMsg
	if len(itemCause) != executionItemCauseBytes {
		t.Fatalf("the item's quote has %d bytes, the bound says %d", len(itemCause), executionItemCauseBytes)
	}
	for _, n := range []int{1, 8} {
		execMsg := "deleting deploy items failed: " + strings.Join(names[:n], ", ") + itemCause
		msg := subObjectsDeleteFailedMessage([]subObjectFailure{{kind: "execution", name: "e", phase: lsv1alpha1.PhaseDeleteFailed,
			lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: execMsg}}})
		if n == 1 && !strings.HasSuffix(msg, "; cause: execution e: DeleteFailed: "+execMsg+deleteRetryAdvice) {
			t.Errorf("one failed item: the execution's message is not quoted whole: %q", msg)
		}
		// Up a tree of sub-installations with names of the longest kind.
		for level := range 6 {
			if !strings.HasSuffix(msg, itemCause+deleteRetryAdvice) {
				t.Fatalf("%d failed items, level %d: the item's quote is not whole at the end: %q", n, level, msg)
			}
			_, cause, _ := strings.Cut(msg, causeMarker)
			if max := len("sub-installation ") + 253 + len(" → ") + maxPassedCauseBytes + len(deleteRetryAdvice); len(cause) > max {
				t.Fatalf("%d failed items, level %d: the cause has %d bytes, more than %d", n, level, len(cause), max)
			}
			if !utf8.ValidString(msg) {
				t.Fatalf("cut inside a rune: %q", msg)
			}
			name := fmt.Sprintf("%d%s", level, strings.Repeat("s", 252))
			msg = subObjectsDeleteFailedMessage([]subObjectFailure{{kind: "sub-installation", name: name, phase: lsv1alpha1.PhaseDeleteFailed,
				lastError: &lsv1alpha1.Error{Reason: ReasonDeleteFailed, Message: msg}}})
		}
	}
}

// An execution's message is quoted on one line, all of it: a deployer's
// error may span lines, and its way out comes last. A sub-installation's
// keeps its first line (a template error quotes the template after it).
func TestExecutionMessageSpanningLinesIsQuotedWhole(t *testing.T) {
	msg := subObjectsFailedMessage([]subObjectFailure{{kind: "execution", name: "x", phase: lsv1alpha1.PhaseFailed,
		lastError: &lsv1alpha1.Error{Reason: "DeployItemsFailed", Message: "deploy items failed: a; a: ApplyFailed: first\n  second\n\nthird; retry with the annotation"}}})
	if want := "sub-objects failed: execution x (Failed); cause: execution x: DeployItemsFailed: deploy items failed: a; a: ApplyFailed: first second third; retry with the annotation"; msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
}

// OrphanDeletionFailed quotes the cause of the first failed orphan, as
// SubObjectsDeleteFailed does, with the same advice; a parent passes it up.
func TestOrphansDeleteFailedMessageQuotesTheCause(t *testing.T) {
	child := "deleting sub-objects failed: execution root-one (DeleteFailed); cause: execution root-one: DeleteFailed: deleting deploy items failed: item; item: TargetNotFound: spec.target: Target ns/cluster not found" + deleteRetryAdvice
	msg := orphansDeleteFailedMessage([]subObjectFailure{
		{kind: "sub-installation", name: "root-two", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: ReasonDeleteFailed, Message: child}},
		{kind: "sub-installation", name: "root-one", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: ReasonDeleteFailed, Message: child}},
	})
	inner := "execution root-one: DeleteFailed: deleting deploy items failed: item; item: TargetNotFound: spec.target: Target ns/cluster not found"
	want := "deleting orphans failed: sub-installation root-one (DeleteFailed), sub-installation root-two (DeleteFailed); cause: sub-installation root-one → " + inner + deleteRetryAdvice
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
	up := subObjectsFailedMessage([]subObjectFailure{{kind: "sub-installation", name: "root", phase: lsv1alpha1.PhaseFailed,
		lastError: &lsv1alpha1.Error{Reason: ReasonOrphansDeleteFailed, Message: msg}}})
	if want := "sub-objects failed: sub-installation root (Failed); cause: sub-installation root → sub-installation root-one → " + inner; up != want {
		t.Errorf("parent's message\n%s\nwant\n%s", up, want)
	}
}

// Init waits for sub-objects on their way out: one deleted by hand is
// created again once gone, an orphan the job deleted is not; a failed
// deletion says which it was.
func TestGoneWaitMessage(t *testing.T) {
	for _, c := range []struct {
		hand, orphans []string
		want          string
	}{
		{[]string{"execution a"}, nil, "execution a, deleted by hand, to be gone before they are created again"},
		{nil, []string{"execution a"}, "execution a, deleted and no longer rendered by the blueprint, to be gone (they are not created again)"},
		{[]string{"installation a-b", "installation a-c"}, []string{"execution a"}, "installation a-b, installation a-c, deleted by hand, to be gone before they are created again; " +
			"and execution a, deleted and no longer rendered by the blueprint, to be gone (they are not created again)"},
	} {
		if got := goneWaitMessage(c.hand, c.orphans); got != c.want {
			t.Errorf("goneWaitMessage(%q, %q)\n%s\nwant\n%s", c.hand, c.orphans, got, c.want)
		}
	}
	f := subObjectFailure{kind: "execution", name: "a", phase: lsv1alpha1.PhaseDeleteFailed, lastError: &lsv1alpha1.Error{Reason: "DeleteFailed", Message: "m"}}
	if got, want := handDeletionFailedMessage("execution a", true, f), "execution a, no longer rendered by the blueprint, was deleted and its deletion failed; cause: execution a: DeleteFailed: m"+deleteRetryAdvice; got != want {
		t.Errorf("orphan's failed deletion\n%s\nwant\n%s", got, want)
	}
}
