// Package text bounds the messages Terrace's controllers quote from other
// objects (a deploy item's lastError in its execution's, a SpaceRequest's
// condition in an Event on its claim), so that status fields and Event notes
// stay small whatever the quoted object says. Lengths are in bytes, as the
// API server counts them, and every cut falls on a character boundary, so
// the result is valid UTF-8 when the input is.
package text

import "unicode/utf8"

// Ellipsis ends a message that Shorten cut.
const Ellipsis = "…"

// Cut marks where CutMiddle dropped the middle of a message.
const Cut = " … "

// Shorten returns s if it has at most limit bytes; otherwise its start,
// ending in Ellipsis, in at most limit bytes.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return s[:runeStartAtOrBefore(s, limit-len(Ellipsis))] + Ellipsis
}

// CutMiddle returns s if it has at most limit bytes; otherwise its start
// and its last tail bytes (fewer if a character straddles that point), with
// Cut between them, in at most limit bytes. The start of a message says what
// failed; its end often says how to go on, which a cut at the end would lose.
// tail must leave room for Cut: at most limit-len(Cut).
func CutMiddle(s string, limit, tail int) string {
	if len(s) <= limit {
		return s
	}
	tail = min(max(tail, 0), limit-len(Cut))
	head := runeStartAtOrBefore(s, limit-tail-len(Cut))
	from := len(s) - tail
	for from < len(s) && !utf8.RuneStart(s[from]) {
		from++
	}
	return s[:head] + Cut + s[from:]
}

// runeStartAtOrBefore returns the largest index i <= n (and >= 0) at which
// a character of s starts (or len(s)).
func runeStartAtOrBefore(s string, n int) int {
	if n <= 0 {
		return 0
	}
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
