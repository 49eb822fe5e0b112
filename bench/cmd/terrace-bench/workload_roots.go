package main

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// rootInstallations: n root installations with one mock item each, created
// at once, until all are Succeeded.
func rootInstallations(n, creators int) workload {
	var t *tracker
	w := workload{
		name:        fmt.Sprintf("%s-%d", wRoots, n),
		description: fmt.Sprintf("%d root installations × one mock item, created at once (%d concurrent creators) → all Succeeded", n, creators),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := mockRoots(ns, "root-", n)
		// Sub-objects are not installations: n is every installation.
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// crowded: n root installations with one mock item each, created at once in
// a namespace where present root installations were created and finished
// beforehand (not measured), until the n new ones are all Succeeded. Next to
// roots-n it shows whether the time per installation grows with the number
// already in the namespace.
func crowded(present, n, creators int) workload {
	var t *tracker
	w := workload{
		name: fmt.Sprintf("%s-%d", wCrowded, n),
		description: fmt.Sprintf("%d root installations × one mock item, created at once (%d concurrent creators) in a namespace that holds %d Succeeded ones → the new ones all Succeeded",
			n, creators, present),
		roots: n,
	}
	const newPrefix = "new-"
	w.prepare = func(ctx context.Context, b *bench, ns string) error {
		before, err := b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		if err != nil {
			return err
		}
		defer before.close()
		objs := mockRoots(ns, "present-", present)
		if err := b.createAtOnce(ctx, objs, creators); err != nil {
			return err
		}
		if err := before.waitAll(ctx, present); err != nil {
			return fmt.Errorf("the %d installations present beforehand: %w", present, err)
		}
		// The measured tracker's informer lists the present ones too: only
		// the new ones count.
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, func(o client.Object) (state, string) {
			if !strings.HasPrefix(o.GetName(), newPrefix) {
				return pending, ""
			}
			return jobDone(o)
		})
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := mockRoots(ns, newPrefix, n)
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// mockRoots are n root installations with one mock item each, named
// prefix plus a four-digit number.
func mockRoots(ns, prefix string, n int) []client.Object {
	objs := make([]client.Object, n)
	for i := range n {
		objs[i] = rootInstallation(ns, fmt.Sprintf("%s%04d", prefix, i), mockBlueprint(), false)
	}
	return objs
}
