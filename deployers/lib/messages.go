package lib

import (
	"fmt"

	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/text"
)

// MaxEventNote bounds the note of every Event the library emits: the
// events.k8s.io/v1 API refuses longer notes, and a refused Event is lost.
const MaxEventNote = status.MaxEventNote

// Bounds of a cut message's end: what the library appends to an error (how
// to go on: retry with operation: reconcile, delete-without-uninstall) must
// survive the cut.
const statusMessageTail = 512

// statusMessage bounds a message written to lastError or a condition to
// status.MaxMessage, keeping its start (what failed) and its end (the way
// on). An error can quote what a target cluster answered, which has no bound
// of its own.
func statusMessage(msg string) string {
	return text.CutMiddle(msg, status.MaxMessage, statusMessageTail)
}

// eventNote formats and bounds an Event's note to MaxEventNote.
func eventNote(format string, args ...any) string {
	return status.Note(fmt.Sprintf(format, args...))
}
