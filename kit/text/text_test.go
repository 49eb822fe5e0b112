package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Both functions leave a short message alone, never exceed the limit, never
// split a character, and keep what they promise: Shorten the start,
// CutMiddle the start and the last tail bytes.
func TestBounds(t *testing.T) {
	// One-, two-, three- and four-byte characters, so that every cut point
	// meets every position inside a character.
	unit := "a" + "é" + "€" + "𝄞"
	for n := 0; n < 120; n++ {
		s := strings.Repeat(unit, n) + "end"
		for _, limit := range []int{10, 16, 31, 64, 100} {
			got := Shorten(s, limit)
			if len(s) <= limit && got != s {
				t.Fatalf("Shorten(%q, %d) = %q, want it unchanged", s, limit, got)
			}
			if len(got) > limit || !utf8.ValidString(got) || !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
				t.Fatalf("Shorten(%d bytes, %d) = %q (%d bytes)", len(s), limit, got, len(got))
			}
			tail := limit / 2
			got = CutMiddle(s, limit, tail)
			if len(s) <= limit {
				if got != s {
					t.Fatalf("CutMiddle(%q, %d) = %q, want it unchanged", s, limit, got)
				}
				continue
			}
			head, end, ok := strings.Cut(got, Cut)
			if !ok || len(got) > limit || !utf8.ValidString(got) || !strings.HasPrefix(s, head) || !strings.HasSuffix(s, end) ||
				len(end) < tail-utf8.UTFMax+1 || len(end) > tail {
				t.Fatalf("CutMiddle(%d bytes, %d, %d) = %q (%d bytes, end %d bytes)", len(s), limit, tail, got, len(got), len(end))
			}
		}
	}
}

// The end survives: what a deployer appends to its error (the way out) is
// kept whole by CutMiddle, lost by Shorten.
func TestCutMiddleKeepsTheEnd(t *testing.T) {
	wayOut := `; annotate the deploy item with landscaper.gardener.cloud/delete-without-uninstall: "true" to delete it without uninstalling`
	msg := strings.Repeat("connection refused; ", 40) + wayOut
	if got := CutMiddle(msg, 300, len(wayOut)); !strings.HasSuffix(got, wayOut) || !strings.HasPrefix(got, "connection refused") {
		t.Errorf("CutMiddle = %q", got)
	}
	if got := Shorten(msg, 300); strings.Contains(got, "delete-without-uninstall") {
		t.Errorf("Shorten kept the end: %q", got)
	}
}

// A tail too long for the limit is shrunk to fit beside the cut mark.
func TestCutMiddleTailLongerThanTheLimit(t *testing.T) {
	s := strings.Repeat("x", 100)
	got := CutMiddle(s, 20, 50)
	if len(got) > 20 || !strings.HasPrefix(got, Cut) {
		t.Errorf("CutMiddle(100 x, 20, 50) = %q (%d bytes)", got, len(got))
	}
}
