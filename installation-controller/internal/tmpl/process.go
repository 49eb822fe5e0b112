package tmpl

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The budgets of one render (MaxRenderBytes, MaxDocumentDecodeBytes) bound
// what it may use, not what all renders in flight use together: with several
// workers rendering at once, each within its budget, the controller could
// still exhaust its memory. So every render also reserves what it uses from a
// budget the whole process shares, and fails when it cannot get it.
const (
	// DefaultProcessBudget is the process-wide budget of all renders in
	// flight: half of a 256 MiB GOMEMLIMIT, room for one render's largest
	// document decode or two renders at their budget, while what the
	// renders are charged is an estimate above what they allocate.
	DefaultProcessBudget = 128 << 20
	// ProcessBudgetFlag is the controller's flag that sets the process
	// budget (SetProcessBudget); errors name it.
	ProcessBudgetFlag = "--template-memory-budget"
	// MinProcessBudget is the smallest process budget SetProcessBudget
	// accepts: one render of ordinary size must fit.
	MinProcessBudget = 4 * reserveChunk
	// reserveChunk is how much a render reserves at a time: a render's
	// start waits for one chunk, and each chunk costs a lock.
	reserveChunk = 1 << 20
)

// ErrBusy is the error (errors.Is) of a render that found the process-wide
// budget held by other renders in flight: retrying later can succeed.
var ErrBusy = errors.New("the process-wide budget of the renders in flight is spent")

// processPool is the budget renders reserve from.
type processPool struct {
	mu   sync.Mutex
	size int64
	used int64
	// peak is the most ever reserved at once (tests check it stays
	// within size).
	peak int64
	// freed is closed, and replaced, whenever a render gives back its
	// reservation, waking renders that wait to start.
	freed chan struct{}
}

var process = &processPool{size: DefaultProcessBudget, freed: make(chan struct{})}

// testHookReserved, if set, is called with what a render holds whenever
// it reserved more, its first chunk included.
var testHookReserved func(reserved int64)

// SetProcessBudget sets the process-wide budget of all renders in flight,
// in bytes (ProcessBudgetFlag; DefaultProcessBudget until set). Renders in
// flight keep what they reserved.
func SetProcessBudget(bytes int64) error {
	if bytes < MinProcessBudget {
		return fmt.Errorf("%s %d: the process-wide template budget must be at least %d bytes", ProcessBudgetFlag, bytes, MinProcessBudget)
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	process.size = bytes
	process.wake()
	return nil
}

// ProcessBudget returns the process-wide budget of all renders in flight.
func ProcessBudget() int64 {
	process.mu.Lock()
	defer process.mu.Unlock()
	return process.size
}

// wake wakes the renders waiting to start; p.mu is held.
func (p *processPool) wake() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// take reserves n bytes if they are free.
func (p *processPool) take(n int64) (bool, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used+n > p.size {
		return false, p.size
	}
	p.used += n
	p.peak = max(p.peak, p.used)
	return true, p.size
}

// give returns n reserved bytes.
func (p *processPool) give(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	p.wake()
}

// start reserves a render's first chunk, waiting for other renders to give
// back theirs until b's deadline.
func (b *budget) start() error {
	for {
		process.mu.Lock()
		freed := process.freed
		process.mu.Unlock()
		if ok, _ := process.take(reserveChunk); ok {
			b.reserved = reserveChunk
			if testHookReserved != nil {
				testHookReserved(b.reserved)
			}
			return nil
		}
		timer := time.NewTimer(time.Until(b.deadline))
		select {
		case <-freed:
			timer.Stop()
		case <-b.done:
			timer.Stop()
			return b.waitedTooLong()
		case <-timer.C:
			return b.waitedTooLong()
		}
	}
}

// waitedTooLong is start's error: the render's deadline came while other
// renders held the whole budget.
func (b *budget) waitedTooLong() error {
	if b.byCtx || b.ctx.Err() != nil {
		return fmt.Errorf("waiting for the process-wide template budget (%s), all held by other renders (%w): %w", ProcessBudgetFlag, ErrBusy, b.deadlineError())
	}
	return fmt.Errorf("%w: the render waited until its deadline (%s) for %d bytes of the process-wide budget (%s), all held by other renders", ErrBusy, timeout, reserveChunk, ProcessBudgetFlag)
}

// finish gives back what the render reserved.
func (b *budget) finish() {
	process.give(b.reserved)
	b.reserved = 0
}

// inUse is what the render uses now: what its budget was charged, and its
// output.
func (b *budget) inUse() int64 {
	return b.limit - b.left + b.outputBytes
}

// backed reserves from the process budget what the render uses beyond its
// reservation, in whole chunks, without waiting: renders that waited for
// each other while holding their reservations could all wait until their
// deadlines. fn names what grew.
func (b *budget) backed(fn string) error {
	use := b.inUse()
	if use <= b.reserved {
		return nil
	}
	n := (use - b.reserved + reserveChunk - 1) / reserveChunk * reserveChunk
	ok, size := process.take(n)
	if ok {
		b.reserved += n
		if testHookReserved != nil {
			testHookReserved(b.reserved)
		}
		return b.grew()
	}
	if use > size {
		return fmt.Errorf("%s: the render would use %d bytes, more than the process-wide budget of all renders, %d bytes (%s)", fn, use, size, ProcessBudgetFlag)
	}
	return fmt.Errorf("%s: %w: the render would use %d bytes and holds %d; the other renders in flight hold the rest of the %d bytes (%s)", fn, ErrBusy, use, b.reserved, size, ProcessBudgetFlag)
}

// wrote counts n bytes of output, and reserves them twice: the output
// buffer grows by doubling, so it may take twice what it holds.
func (b *budget) wrote(n int) error {
	b.outputBytes += 2 * int64(n)
	return b.backed("writing the output")
}
