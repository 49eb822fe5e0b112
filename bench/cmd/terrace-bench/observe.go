package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// state is what a tracker's judge says about an object.
type state int

const (
	pending state = iota
	done
	failed
)

// tracker watches one kind in one namespace (an informer: list, then watch)
// and records when each object was first seen done, as the watch event
// arrives.
type tracker struct {
	judge func(client.Object) (state, string)
	stop  context.CancelFunc

	mu      sync.Mutex
	doneAt  map[string]time.Time
	failure string
	waiters map[string]chan struct{} // closed when the object is done
	changed chan struct{}            // signalled on every new done or failure
}

// track starts an informer for obj's kind in namespace ns and waits until it
// has synced. judge says whether an object is done, failed (with a message),
// or neither; objects may be done several times, only the first counts.
func (b *bench) track(ctx context.Context, ns string, obj client.Object, judge func(client.Object) (state, string)) (*tracker, error) {
	t := &tracker{
		judge:   judge,
		doneAt:  map[string]time.Time{},
		waiters: map[string]chan struct{}{},
		changed: make(chan struct{}, 1),
	}
	stop, err := b.startInformers(ctx, ns, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o) },
		UpdateFunc: func(_, o any) { t.observe(o) },
	}, obj)
	if err != nil {
		return nil, err
	}
	t.stop = stop
	return t, nil
}

// startInformers starts one informer per kind of objs in namespace ns, all
// calling handler, and waits until they have synced; the returned function
// stops them.
func (b *bench) startInformers(ctx context.Context, ns string, handler toolscache.ResourceEventHandler, objs ...client.Object) (context.CancelFunc, error) {
	c, err := cache.New(b.cfg, cache.Options{Scheme: b.scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the informers for %d kinds in %s did not sync", len(objs), ns)
	}
	return cancel, nil
}

func (t *tracker) observe(o any) {
	now := time.Now()
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	st, msg := t.judge(obj)
	if st == pending {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case done:
		if _, seen := t.doneAt[obj.GetName()]; seen {
			return
		}
		t.doneAt[obj.GetName()] = now
		if w, ok := t.waiters[obj.GetName()]; ok {
			close(w)
		}
	case failed:
		if t.failure != "" {
			return
		}
		t.failure = obj.GetName() + ": " + msg
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// waitAll waits until n objects are done; it fails on the first failure.
func (t *tracker) waitAll(ctx context.Context, n int) error {
	for {
		t.mu.Lock()
		count, failure := len(t.doneAt), t.failure
		t.mu.Unlock()
		if failure != "" {
			return fmt.Errorf("failed: %s", failure)
		}
		if count >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d done: %w", count, n, ctx.Err())
		case <-t.changed:
		}
	}
}

// waitFor waits until the named object is done and returns when its event
// arrived.
func (t *tracker) waitFor(ctx context.Context, name string) (time.Time, error) {
	t.mu.Lock()
	w, ok := t.waiters[name]
	if !ok {
		w = make(chan struct{})
		t.waiters[name] = w
		if _, isDone := t.doneAt[name]; isDone {
			close(w)
		}
	}
	t.mu.Unlock()
	for {
		select {
		case <-w:
			t.mu.Lock()
			defer t.mu.Unlock()
			return t.doneAt[name], nil
		case <-t.changed:
			t.mu.Lock()
			failure := t.failure
			t.mu.Unlock()
			if failure != "" {
				return time.Time{}, fmt.Errorf("failed: %s", failure)
			}
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s not done: %w", name, ctx.Err())
		}
	}
}

// times are the done times, in order.
func (t *tracker) times() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Time, 0, len(t.doneAt))
	for _, at := range t.doneAt {
		out = append(out, at)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// timeUntilDone times create (the root objects' creation) and the wait
// until n objects are done.
func (t *tracker) timeUntilDone(ctx context.Context, n int, create func() error) (timing, error) {
	tm := timing{start: time.Now()}
	if err := create(); err != nil {
		return tm, err
	}
	err := t.waitAll(ctx, n)
	tm.doneAt = t.times()
	return tm, err
}

// close stops the informer; a nil tracker (prepare failed) is a no-op.
func (t *tracker) close() {
	if t != nil {
		t.stop()
	}
}
