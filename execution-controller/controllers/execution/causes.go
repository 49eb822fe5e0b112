package execution

import (
	"unicode/utf8"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// maxCauseLength bounds the failed item's message quoted in the execution's
// lastError (the installation above quotes the execution's in turn).
const maxCauseLength = 300

// firstCause names the first failed item (in the order given) whose
// lastError says why, with its reason and message, for the execution's
// lastError: "; <item>: <reason>: <message>" (the message cut to
// maxCauseLength), or "" when none says anything.
func firstCause(items map[string]*lsv1alpha1.DeployItem, failed []string) string {
	for _, n := range failed {
		di := items[n]
		if di == nil || di.Status.LastError == nil {
			continue
		}
		le := di.Status.LastError
		msg := le.Message
		if len(msg) > maxCauseLength {
			cut := maxCauseLength
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
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

// firstCodes are the lastError codes of the first failed item that has any.
func firstCodes(items map[string]*lsv1alpha1.DeployItem, failed []string) []lsv1alpha1.ErrorCode {
	for _, n := range failed {
		if di := items[n]; di != nil && di.Status.LastError != nil && len(di.Status.LastError.Codes) > 0 {
			return append([]lsv1alpha1.ErrorCode(nil), di.Status.LastError.Codes...)
		}
	}
	return nil
}
