package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/terrace-dev/terrace/kit/text"
)

// MaxEventNote bounds the note of every Event the stub records: the
// events.k8s.io/v1 API refuses a longer one, and a refused Event is lost.
const MaxEventNote = 1024

// eventNoteTail is how much of a cut note's end is kept: what to do comes
// last.
const eventNoteTail = 384

// boundedRecorder cuts every note to MaxEventNote before recording it.
type boundedRecorder struct{ next events.EventRecorder }

func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.next.Eventf(regarding, related, eventtype, reason, action, "%s",
		text.CutMiddle(fmt.Sprintf(note, args...), MaxEventNote, eventNoteTail))
}
