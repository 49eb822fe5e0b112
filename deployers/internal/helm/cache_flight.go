package helm

import (
	"context"
	"sync"
)

// flightGroup runs one fetch per key at a time: items that need the same
// chart at once (the items of one installation) wait for the first one's
// download instead of each downloading it.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	done chan struct{}
	data []byte
	err  error
	// waiters counts the callers that joined the first.
	waiters int
}

// do returns fetch's result for key, running fetch unless a call for key
// is under way, whose result it then shares. A waiting caller whose ctx
// ends returns ctx's error.
func (g *flightGroup) do(ctx context.Context, key string, fetch func() ([]byte, error)) ([]byte, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*flightCall{}
	}
	if c, ok := g.calls[key]; ok {
		c.waiters++
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.data, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &flightCall{done: make(chan struct{})}
	g.calls[key] = c
	g.mu.Unlock()

	c.data, c.err = fetch()
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
	close(c.done)
	return c.data, c.err
}

// waiting is how many callers wait on the call under way for key.
func (g *flightGroup) waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[key]; ok {
		return c.waiters
	}
	return 0
}
