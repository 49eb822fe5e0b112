package execution

import (
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/text"
)

// maxCauseLength bounds (in bytes) the failed item's message quoted in the
// execution's lastError (the installation above quotes the execution's in
// turn), so the status stays small however much a deployer writes. It holds a
// typical deployer error together with the way out a deployer appends to it,
// so most messages are quoted whole.
const maxCauseLength = 512

// causeTail is how much of the end of a longer message is kept. A deployer
// ends its message with the way out (retry with the reconcile annotation,
// or delete-without-uninstall for a failed deletion: about 215 bytes, the
// longest one): it must survive the cut, so the message is cut in the
// middle, not at the end.
const causeTail = 300

// firstCause names the first failed item (in the order given) whose
// lastError says why, with its reason and message, for the execution's
// lastError: "; <item>: <reason>: <message>" (the message bounded by
// boundCause), or "" when none says anything.
func firstCause(items map[string]*lsv1alpha1.DeployItem, failed []string) string {
	for _, n := range failed {
		di := items[n]
		if di == nil || di.Status.LastError == nil {
			continue
		}
		le := di.Status.LastError
		msg := boundCause(le.Message)
		out := "; " + n + ": "
		if le.Reason != "" {
			out += le.Reason
			if msg != "" {
				out += ": "
			}
		}
		return out + msg
	}
	return ""
}

// boundCause cuts msg to at most maxCauseLength bytes by dropping its middle
// (marked with text.Cut): its start says what failed, its last causeTail
// bytes what to do about it. Cuts fall on rune boundaries.
func boundCause(msg string) string {
	return text.CutMiddle(msg, maxCauseLength, causeTail)
}

// firstCodes are the lastError codes of the first failed item that has any.
func firstCodes(items map[string]*lsv1alpha1.DeployItem, failed []string) []lsv1alpha1.ErrorCode {
	for _, n := range failed {
		if di := items[n]; di != nil && di.Status.LastError != nil && len(di.Status.LastError.Codes) > 0 {
			return append([]lsv1alpha1.ErrorCode(nil), di.Status.LastError.Codes...)
		}
	}
	return nil
}
