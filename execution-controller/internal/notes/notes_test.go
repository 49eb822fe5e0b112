package notes

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/status"
)

// wayOut ends a long message, as a deployer's does.
const wayOut = "; set operation: reconcile to retry"

type captured struct{ note string }

func (c *captured) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	c.note = fmt.Sprintf(note, args...)
}

// A long note reaches the API server within its limit, start and way out
// kept; a short one unchanged; a note with a literal % survives formatting.
func TestRecorderCutsNotes(t *testing.T) {
	c := &captured{}
	r := Recorder(c)
	r.Eventf(nil, nil, "Warning", "R", "A", "job %s failed: %s", "j1", strings.Repeat("item, ", 1000)+wayOut)
	if len(c.note) > MaxEventNote || !strings.HasPrefix(c.note, "job j1 failed: item") || !strings.HasSuffix(c.note, wayOut) {
		t.Fatalf("note not cut to %d bytes keeping start and end: %d bytes, %q", MaxEventNote, len(c.note), c.note)
	}
	r.Eventf(nil, nil, "Normal", "R", "A", "100%% done")
	if c.note != "100% done" {
		t.Fatalf("short note changed: %q", c.note)
	}
}

// Conditions and lastError messages are cut to status.MaxMessage, end kept.
func TestStatusMessagesAreCut(t *testing.T) {
	long := strings.Repeat("x", 3*status.MaxMessage) + wayOut
	conds := []metav1.Condition{{Type: "Ready", Message: long}, {Type: "Progressing", Message: "short"}}
	le := &lsv1alpha1.Error{Message: long}
	Conditions(conds)
	LastError(le)
	LastError(nil)
	for _, m := range []string{conds[0].Message, le.Message} {
		if len(m) > status.MaxMessage || !strings.HasSuffix(m, wayOut) {
			t.Fatalf("message not cut to %d bytes keeping its end: %d bytes", status.MaxMessage, len(m))
		}
	}
	if conds[1].Message != "short" {
		t.Fatalf("short message changed: %q", conds[1].Message)
	}
}
