package installation

import (
	"fmt"
	"sort"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/text"
)

// The quoted cause of a failed sub-object keeps the end of its message: a
// deploy item's message ends with the way out (retry with the reconcile
// annotation, create the Target, or delete-without-uninstall for a failed
// deletion), and the execution ends its own message with the item's. The
// bounds below are in bytes, as the execution controller's are, and checked
// against them: the execution quotes an item's message up to
// executionItemMessageBytes, after the item's name and reason.
const (
	// executionItemMessageBytes is the execution controller's bound on the
	// item message it quotes (maxCauseLength in
	// execution-controller/internal/controller/execution/causes.go); it cuts the
	// middle of a longer one, so the deployer's way out is its end.
	executionItemMessageBytes = 512
	// executionItemCauseBytes is the longest end of an execution's
	// lastError message that quotes its failed item: "; <item>: <reason>:
	// <message>", with an item name of up to 63 bytes (the Execution CRD's
	// limit) and a reason of up to 64 (the deployers' are 22 at most).
	executionItemCauseBytes = len("; ") + 63 + len(": ") + 64 + len(": ") + executionItemMessageBytes
	// causeTail is how much of the end of a longer message a quote keeps:
	// an execution's quote of its item, whole.
	causeTail = executionItemCauseBytes
	// maxCauseBytes bounds the quote of one sub-object's message: the end
	// (causeTail) and, before it, the start, which says what failed ("deploy
	// items failed: a, b", "deleting deploy items failed: …"): an
	// execution's message with a few failed items is quoted whole.
	maxCauseBytes = 1024
	// maxPassedCauseBytes bounds the cause a sub-installation passes up (see
	// cause): its quote, behind the names of the sub-installations it
	// passed through ("sub-installation a → sub-installation a-b → …").
	maxPassedCauseBytes = 2 * maxCauseBytes
)

// causeMarker separates a SubObjectsFailed (or SubObjectsDeleteFailed)
// message's list of failed sub-objects from the cause; a parent finds its child's cause after it
// (subObjectFailure.cause), so the deepest cause travels up the tree.
const causeMarker = "; cause: "

// subObjectFailure is a sub-object that finished the job unsuccessfully.
type subObjectFailure struct {
	kind, name string
	phase      lsv1alpha1.Phase
	lastError  *lsv1alpha1.Error
}

func (f subObjectFailure) String() string { return fmt.Sprintf("%s %s (%s)", f.kind, f.name, f.phase) }

// deleteRetryAdvice ends a SubObjectsDeleteFailed message, after the cause:
// the reconcile annotation alone repeats the deletion that failed, so the
// cause comes first.
var deleteRetryAdvice = `; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with ` +
	lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`

// cause names f and the reason and message of its lastError, the message
// bounded by quote. A sub-installation that failed SubObjectsFailed,
// SubObjectsDeleteFailed or OrphanDeletionFailed itself passes its own cause
// on (without the retry advice), prefixed with its name: a root shows the
// cause found at the bottom of the tree ("sub-installation a → execution a:
// DeployItemsFailed: deploy items failed: x"), not a message about a
// message.
func (f subObjectFailure) cause() string {
	who := f.kind + " " + f.name
	le := f.lastError
	switch le.Reason {
	case ReasonSubObjectsFailed, ReasonDeleteFailed, ReasonOrphansDeleteFailed:
		if _, inner, ok := strings.Cut(le.Message, causeMarker); ok {
			inner = strings.TrimSuffix(inner, deleteRetryAdvice)
			// Bounded once more (a message written by something else than
			// this controller may be of any length), and so that the names
			// of a deep tree cannot push the cause's end out.
			return who + " → " + cutMiddle(inner, maxPassedCauseBytes)
		}
	}
	return fmt.Sprintf("%s: %s: %s", who, le.Reason, quote(f.kind, le.Message))
}

// quote is the message of a sub-object of kind, as its cause quotes it: one
// line, at most maxCauseBytes, its middle cut when longer (cutMiddle). An
// installation's message keeps its first line only: a template error quotes
// the template's lines after it. An execution's message quotes a deploy
// item's, whose way out comes last, also when a deployer's error spans lines:
// its lines are joined.
func quote(kind, msg string) string {
	if kind == "execution" {
		msg = joinLines(msg)
	} else {
		msg = firstLine(msg)
	}
	return cutMiddle(msg, maxCauseBytes)
}

// subObjectsFailedMessage is the lastError message of a job whose
// sub-objects failed: each failed sub-object, then the cause of the first one
// (sub-installations by name, then the execution) that has a lastError, so
// the reason is readable on the installation a user looks at. Sub-objects
// that failed only because a predecessor did come last: their predecessor
// holds the cause.
func subObjectsFailedMessage(failed []subObjectFailure) string {
	return "sub-objects failed: " + failedWithCause(failed)
}

// subObjectsDeleteFailedMessage is the lastError message of a deletion job
// whose sub-objects ended DeleteFailed: the same list and cause as
// subObjectsFailedMessage, then how to go on.
func subObjectsDeleteFailedMessage(failed []subObjectFailure) string {
	return "deleting sub-objects failed: " + failedWithCause(failed) + deleteRetryAdvice
}

// orphansDeleteFailedMessage is the lastError message of a job whose
// orphans (the sub-objects its blueprint no longer renders) ended
// DeleteFailed: the list and cause as for subObjectsDeleteFailedMessage, and
// the same way on (the next job hands the orphans their deletion again).
func orphansDeleteFailedMessage(failed []subObjectFailure) string {
	return "deleting orphans failed: " + failedWithCause(failed) + deleteRetryAdvice
}

// failedWithCause lists the failed sub-objects and quotes the cause of the
// first one with a lastError (see subObjectsFailedMessage).
func failedWithCause(failed []subObjectFailure) string {
	sort.SliceStable(failed, func(i, j int) bool {
		if (failed[i].kind == "execution") != (failed[j].kind == "execution") {
			return failed[j].kind == "execution"
		}
		return failed[i].name < failed[j].name
	})
	names := make([]string, len(failed))
	for i, f := range failed {
		names[i] = f.String()
	}
	msg := strings.Join(names, ", ")
	var first *subObjectFailure
	for i := range failed {
		f := &failed[i]
		if f.lastError == nil || f.lastError.Reason == "" {
			continue
		}
		if first == nil || (first.lastError.Reason == ReasonPredecessorFailed && f.lastError.Reason != ReasonPredecessorFailed) {
			first = f
		}
	}
	if first != nil {
		msg += causeMarker + first.cause()
	}
	return msg
}

// firstLine cuts s at its first line break (a template error quotes the
// source lines after it), marking the cut with "…".
func firstLine(s string) string {
	if line, _, ok := strings.Cut(strings.TrimSpace(s), "\n"); ok {
		return strings.TrimSpace(line) + " …"
	}
	return strings.TrimSpace(s)
}

// joinLines puts the lines of s on one, each trimmed, separated by a
// space; blank lines go.
func joinLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// cutMiddle bounds s to max bytes by dropping its middle (marked with
// text.Cut): the start says what failed, the last causeTail bytes how to
// go on. Both cuts fall on rune boundaries.
func cutMiddle(s string, max int) string {
	return text.CutMiddle(s, max, causeTail)
}
