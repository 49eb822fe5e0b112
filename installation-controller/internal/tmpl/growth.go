package tmpl

import "context"

// largeRender is a hook a render calls, once per context, when what it
// holds of the process-wide budget first reaches threshold bytes.
type largeRender struct {
	threshold int64
	fire      func() error
	fired     bool
}

type largeRenderKey struct{}

// WithLargeRenderHook returns ctx under which the first render that comes to
// hold threshold bytes of the process-wide budget calls fire before it goes
// on; an error of fire fails that render. Small renders call nothing: the
// installation controller marks only a render that could take its process
// down, and so spends no request on the others.
func WithLargeRenderHook(ctx context.Context, threshold int64, fire func() error) context.Context {
	return context.WithValue(ctx, largeRenderKey{}, &largeRender{threshold: threshold, fire: fire})
}

// grew calls the large-render hook of b's context once b holds its
// threshold.
func (b *budget) grew() error {
	h, _ := b.ctx.Value(largeRenderKey{}).(*largeRender)
	if h == nil || h.fired || b.reserved < h.threshold {
		return nil
	}
	h.fired = true
	return h.fire()
}
