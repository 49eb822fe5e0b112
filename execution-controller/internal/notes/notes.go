// Package notes bounds what the execution controller writes for people: the
// messages of an execution's conditions and lastError, a deploy item's
// lastError, and the notes of its Events. They quote other objects (item
// names, a deployer's message, the API server's answer), so their length is
// the tenants' to choose; cut here, a status write is never refused for its
// size and an Event is never dropped for its note.
//
// Every cut drops a message's middle (kit/text.CutMiddle): its start says what
// failed, its end how to go on.
package notes

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/status"
)

// MaxEventNote is the longest Event note the API server accepts.
const MaxEventNote = status.MaxEventNote

// Message cuts a status message (condition or lastError) to
// status.MaxMessage bytes.
func Message(msg string) string { return status.Message(msg) }

// Note cuts an Event note to MaxEventNote bytes.
func Note(note string) string { return status.Note(note) }

// Conditions cuts the message of every condition.
func Conditions(conds []metav1.Condition) {
	for i := range conds {
		conds[i].Message = Message(conds[i].Message)
	}
}

// LastError cuts the message of le, if any.
func LastError(le *lsv1alpha1.Error) {
	if le != nil {
		le.Message = Message(le.Message)
	}
}

// Recorder returns an EventRecorder whose Events carry notes cut by Note.
func Recorder(r events.EventRecorder) events.EventRecorder { return status.BoundedRecorder(r) }
