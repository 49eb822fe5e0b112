package observability

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/terrace-dev/terrace/kit/text"
)

// MaxEventNote bounds the note of every Event the binder records: the
// events.k8s.io/v1 API refuses a longer one, and a refused Event is lost.
const MaxEventNote = 1024

// eventNoteTail is how much of a cut note's end is kept: what to do comes
// last.
const eventNoteTail = 384

// BoundedRecorder records through Next with every note cut to MaxEventNote.
type BoundedRecorder struct{ Next events.EventRecorder }

// Eventf formats the note, cuts it and records it.
func (b BoundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.Next.Eventf(regarding, related, eventtype, reason, action, "%s",
		text.CutMiddle(fmt.Sprintf(note, args...), MaxEventNote, eventNoteTail))
}
