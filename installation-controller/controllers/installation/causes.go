package installation

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// maxCauseMessage bounds the failed sub-object's lastError message quoted in
// a SubObjectsFailed message: enough for its first line (a template error's
// location and cause, "deploy items failed: …", "cyclic dependencies: a -> b
// -> a"), short enough for the Message column of `kubectl get -o wide`.
const maxCauseMessage = 300

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

// maxDeleteCauseMessage bounds the quoted cause of a failed deletion. It is
// longer: a deletion has no next job that could succeed on its own, so the
// way out the deploy item names at the end of its message (create the
// Target again, or delete-without-uninstall) must survive the cut, behind
// the execution's own words (its list of failed items, then the item's
// message, which the execution controller bounds to 300 bytes).
const maxDeleteCauseMessage = 2 * maxCauseMessage

// deleteRetryAdvice ends a SubObjectsDeleteFailed message, after the cause:
// the reconcile annotation alone repeats the deletion that failed, so the
// cause comes first.
var deleteRetryAdvice = `; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with ` +
	lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`

// cause names f and the reason and message of its lastError, the message's
// first line cut to limit runes. A sub-installation that failed
// SubObjectsFailed or SubObjectsDeleteFailed itself passes its own cause on
// (without the retry advice), prefixed with its name: a root shows the cause
// found at the bottom of the tree ("sub-installation a → execution a:
// DeployItemsFailed: deploy items failed: x"), not a message about a
// message.
func (f subObjectFailure) cause(limit int) string {
	who := f.kind + " " + f.name
	le := f.lastError
	if le.Reason == ReasonSubObjectsFailed || le.Reason == ReasonDeleteFailed {
		if _, inner, ok := strings.Cut(le.Message, causeMarker); ok {
			inner = strings.TrimSuffix(inner, deleteRetryAdvice)
			// Bounded once more: a message written by something else
			// than this controller may be of any length.
			return who + " → " + truncate(inner, 4*limit)
		}
	}
	return fmt.Sprintf("%s: %s: %s", who, le.Reason, truncate(firstLine(le.Message), limit))
}

// subObjectsFailedMessage is the lastError message of a job whose
// sub-objects failed: each failed sub-object, then the cause of the first one
// (sub-installations by name, then the execution) that has a lastError, so
// the reason is readable on the installation a user looks at. Sub-objects
// that failed only because a predecessor did come last: their predecessor
// holds the cause.
func subObjectsFailedMessage(failed []subObjectFailure) string {
	return "sub-objects failed: " + failedWithCause(failed, maxCauseMessage)
}

// subObjectsDeleteFailedMessage is the lastError message of a deletion job
// whose sub-objects ended DeleteFailed: the same list and cause as
// subObjectsFailedMessage (longer, see maxDeleteCauseMessage), then how to
// go on.
func subObjectsDeleteFailedMessage(failed []subObjectFailure) string {
	return "deleting sub-objects failed: " + failedWithCause(failed, maxDeleteCauseMessage) + deleteRetryAdvice
}

// failedWithCause lists the failed sub-objects and quotes the cause of the
// first one with a lastError (see subObjectsFailedMessage), cut to limit.
func failedWithCause(failed []subObjectFailure, limit int) string {
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
		msg += causeMarker + first.cause(limit)
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

// truncate cuts s to at most n runes, the last one "…" when it was cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := 0
	for i := range s {
		if runes == n-1 {
			return s[:i] + "…"
		}
		runes++
	}
	return s
}
