package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/terrace-dev/terrace/kit/text"
)

// MaxEventNote is the longest Event note the events.k8s.io/v1 API accepts;
// it refuses, and so loses, a longer one.
const MaxEventNote = 1024

const (
	// messageTail and noteTail are how much of a cut message's end is
	// kept: a message says what failed first and how to go on last.
	messageTail = MaxMessage / 4
	noteTail    = 400
)

// Message cuts a status message (a condition's or lastError's) to
// MaxMessage bytes, keeping its start and its end.
func Message(msg string) string { return text.CutMiddle(msg, MaxMessage, messageTail) }

// Note cuts an Event note to MaxEventNote bytes, keeping its start and end.
func Note(note string) string { return text.CutMiddle(note, MaxEventNote, noteTail) }

// BoundedRecorder records through next with every note cut by Note: an
// Event quoting a tenant's object is recorded, not refused for its size.
func BoundedRecorder(next events.EventRecorder) events.EventRecorder { return boundedRecorder{next} }

type boundedRecorder struct{ next events.EventRecorder }

func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.next.Eventf(regarding, related, eventtype, reason, action, "%s", Note(fmt.Sprintf(note, args...)))
}
