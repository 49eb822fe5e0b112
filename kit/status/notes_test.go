package status_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/terrace-dev/terrace/kit/status"
)

type noteRecorder struct{ notes []string }

func (r *noteRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(note, args...))
}

// TestBoundedRecorderCutsNotes: a note longer than the events API accepts
// is recorded cut to MaxEventNote, its start and end kept; a short one passes
// unchanged (formatted as printf formats it).
func TestBoundedRecorderCutsNotes(t *testing.T) {
	next := &noteRecorder{}
	rec := status.BoundedRecorder(next)
	rec.Eventf(nil, nil, "Warning", "Failed", "Apply", "item %s failed: %s; retry with operation=reconcile", "a", strings.Repeat("x", 5000))
	rec.Eventf(nil, nil, "Normal", "Done", "Apply", "100%% done")
	if len(next.notes) != 2 {
		t.Fatalf("recorded %d notes, want 2", len(next.notes))
	}
	long := next.notes[0]
	if len(long) > status.MaxEventNote || !strings.HasPrefix(long, "item a failed: x") || !strings.HasSuffix(long, "retry with operation=reconcile") {
		t.Errorf("note not cut to %d bytes keeping start and end: %d bytes, %q…", status.MaxEventNote, len(long), long[:40])
	}
	if next.notes[1] != "100% done" {
		t.Errorf("short note changed: %q", next.notes[1])
	}
}

// TestMessageKeepsStartAndEnd: a status message is cut to MaxMessage with
// what failed and how to go on both kept.
func TestMessageKeepsStartAndEnd(t *testing.T) {
	msg := status.Message("failed: " + strings.Repeat("y", 3*status.MaxMessage) + " the way out")
	if len(msg) > status.MaxMessage || !strings.HasPrefix(msg, "failed: ") || !strings.HasSuffix(msg, " the way out") {
		t.Errorf("message of %d bytes not cut keeping start and end", len(msg))
	}
	if short := status.Message("short"); short != "short" {
		t.Errorf("short message changed: %q", short)
	}
}
