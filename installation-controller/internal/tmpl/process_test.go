package tmpl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// large builds about 6 MiB: six strings of 1 MiB kept in a list.
const large = `{{ $l := list }}{{ range until 6 }}{{ $l = append $l (repeat 1048576 "x") }}{{ end }}a: {{ len $l }}`

func withProcessBudget(t *testing.T, bytes int64) {
	t.Helper()
	if err := SetProcessBudget(bytes); err != nil {
		t.Fatal(err)
	}
	process.mu.Lock()
	process.peak = process.used
	process.mu.Unlock()
	t.Cleanup(func() {
		testHookReserved = nil
		if err := SetProcessBudget(DefaultProcessBudget); err != nil {
			t.Error(err)
		}
	})
}

func renderCtx(ctx context.Context, tpl string) (map[string]any, error) {
	return ExecuteContext(ctx, Source{Execution: "x", File: "blueprint.yaml", Line: 1, Template: tpl}, nil)
}

// Renders in flight share one budget. Six renders of 6 MiB each, all in
// flight at once with a budget of 16 MiB (each waits until all six started,
// and those that got 4 MiB wait until every other got as far or failed, so
// at most four get there): some fail with ErrBusy, the renders never hold
// more than the budget together, and once they are done a small render gets
// its share again.
func TestProcessBudgetBoundsRendersInFlight(t *testing.T) {
	const n, budgetBytes, barrier = 6, 16 << 20, 4 << 20
	withProcessBudget(t, budgetBytes)
	if process.used != 0 {
		t.Fatalf("%d bytes reserved before the test", process.used)
	}
	var mu sync.Mutex
	waiting := 0
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	testHookReserved = func(reserved int64) {
		if reserved == reserveChunk {
			started.Done()
			started.Wait()
			return
		}
		if reserved < barrier {
			return
		}
		mu.Lock()
		waiting++
		mu.Unlock()
		<-release
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := renderCtx(context.Background(), large)
			errs <- err
		}()
	}
	deadline := time.After(30 * time.Second)
	for settled := false; !settled; {
		mu.Lock()
		settled = waiting+len(errs) >= n
		mu.Unlock()
		select {
		case <-deadline:
			t.Fatal("the renders neither reached the barrier nor failed")
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	busy := 0
	for err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrBusy):
			busy++
			if !strings.Contains(err.Error(), "the other renders in flight hold the rest of the 16777216 bytes ("+ProcessBudgetFlag+")") {
				t.Errorf("busy error %q does not say why", err)
			}
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if busy == 0 {
		t.Error("no render failed with ErrBusy")
	}
	process.mu.Lock()
	peak, used := process.peak, process.used
	process.mu.Unlock()
	if peak > budgetBytes || used != 0 {
		t.Errorf("peak %d (budget %d), %d still reserved", peak, budgetBytes, used)
	}
	testHookReserved = nil
	if out, err := renderCtx(context.Background(), `a: {{ repeat 3 "x" }}`); err != nil || out["a"] != "xxx" {
		t.Fatalf("small render afterwards: %v, %v", out, err)
	}
}

// A render that alone needs more than the whole budget says so; one that
// cannot start because other renders hold the budget waits until the
// reconcile's deadline.
func TestProcessBudgetErrors(t *testing.T) {
	withProcessBudget(t, MinProcessBudget)
	_, err := renderCtx(context.Background(), large)
	if err == nil || errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "more than the process-wide budget of all renders, 4194304 bytes ("+ProcessBudgetFlag+")") {
		t.Fatalf("error %v, want the render to exceed the budget alone", err)
	}
	if ok, _ := process.take(MinProcessBudget); !ok {
		t.Fatal("the budget is held")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = renderCtx(ctx, `a: 1`)
	process.give(MinProcessBudget)
	if !errors.Is(err, ErrRenderDeadline) || !strings.Contains(err.Error(), "waiting for the process-wide template budget") {
		t.Fatalf("error %v, want the render to wait until the deadline", err)
	}
	if err := SetProcessBudget(MinProcessBudget - 1); err == nil {
		t.Error("a budget below MinProcessBudget was accepted")
	}
}

// The reconcile's deadline stops a render that would run far longer.
func TestRenderStopsAtTheReconcileDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := renderCtx(ctx, `a: {{ range until 10000 }}{{ range until 400 }}{{ end }}{{ end }}1`)
	if !errors.Is(err, ErrRenderDeadline) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "render failed: executing \"x\": the reconcile's render deadline was exceeded") {
		t.Fatalf("error %v, want the reconcile's deadline", err)
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	_, err = renderCtx(cancelled, `a: {{ range until 10 }}{{ end }}1`)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the cancellation", err)
	}
}
