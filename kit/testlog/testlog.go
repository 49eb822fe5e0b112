// Package testlog collects what a logger writes, for tests that check what a
// controller logs (or does not log: a "Reconciler error" for a mere wait).
package testlog

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer for a logger (one entry a line, as zap's JSON
// encoder writes them). The controllers' goroutines write while the test
// reads, so both take the lock.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Lines returns the lines written so far that contain every one of subs
// (all lines when subs is empty), without their line ends.
func (b *Buffer) Lines(subs ...string) []string {
	b.mu.Lock()
	text := b.buf.String()
	b.mu.Unlock()
	var out []string
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if line == "" || !containsAll(line, subs) {
			continue
		}
		out = append(out, line)
	}
	return out
}

func containsAll(line string, subs []string) bool {
	for _, s := range subs {
		if !strings.Contains(line, s) {
			return false
		}
	}
	return true
}
