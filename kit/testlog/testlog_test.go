package testlog

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestLinesMatchesEverySubstring(t *testing.T) {
	var b Buffer
	for _, s := range []string{`{"msg":"waiting","name":"a"}` + "\n", `{"msg":"Reconciler error","name":"a"}` + "\n",
		`{"msg":"waiting","name":"b"}`} { // the last one without its line end yet
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Lines(`"msg":"waiting"`, `"name":"a"`), []string{`{"msg":"waiting","name":"a"}`}; !slices.Equal(got, want) {
		t.Errorf("Lines(waiting, a) = %q, want %q", got, want)
	}
	if got := b.Lines(`"msg":"waiting"`); len(got) != 2 || got[1] != `{"msg":"waiting","name":"b"}` {
		t.Errorf("Lines(waiting) = %q, want both waiting lines", got)
	}
	if got := b.Lines(); len(got) != 3 {
		t.Errorf("Lines() = %q, want all 3", got)
	}
	if got := b.Lines("nowhere"); got != nil {
		t.Errorf("Lines(nowhere) = %q, want none", got)
	}
}

// TestWritesWhileReading is run with -race by whoever hunts races: the
// controllers log from their goroutines while a test reads.
func TestWritesWhileReading(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				if _, err := fmt.Fprintf(&b, "w%d-%d\n", i, j); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 50 {
		_ = b.Lines("w")
	}
	wg.Wait()
	if got := len(b.Lines("w")); got != 400 {
		t.Errorf("%d lines, want 400", got)
	}
}
