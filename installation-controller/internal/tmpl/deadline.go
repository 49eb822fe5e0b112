package tmpl

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrRenderDeadline is the error (errors.Is) of a render stopped by the
// reconcile's deadline; errors.Is(err, context.DeadlineExceeded) holds too.
var ErrRenderDeadline = errors.New("the reconcile's render deadline was exceeded")

// setDeadline bounds the render by Timeout and by ctx, whose deadline is
// the reconcile's: every render and mapping of one reconcile shares it.
func (b *budget) setDeadline(ctx context.Context) {
	if ctx == nil {
		ctx = context.Background()
	}
	b.ctx, b.done = ctx, ctx.Done()
	b.deadline = time.Now().Add(timeout)
	b.byCtx = false
	if d, ok := ctx.Deadline(); ok && d.Before(b.deadline) {
		b.deadline, b.byCtx = d, true
	}
}

// deadlineError says why ctx ended the render.
func (b *budget) deadlineError() error {
	err := b.ctx.Err()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		// Past the deadline, the context may not have noticed yet.
		return fmt.Errorf("%w (%w)", ErrRenderDeadline, context.DeadlineExceeded)
	}
	return fmt.Errorf("the reconcile was cancelled: %w", err)
}
