package main

import (
	"context"
	"fmt"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// tree: one root installation whose blueprint has depth levels of fanOut
// sub-installations, each with one manifest item, until every installation
// is Succeeded.
func tree(depth, fanOut int) workload {
	var t *tracker
	fs, installations := treeBlueprint(depth, fanOut)
	w := workload{
		name:        wTree,
		description: fmt.Sprintf("a tree of depth %d, fan-out %d (%d installations, one manifest item each) → all Succeeded", depth, fanOut, installations),
		roots:       1,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if err := b.createTarget(ctx, ns); err != nil {
			return err
		}
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		return t.timeUntilDone(ctx, installations, func() error { return b.c.Create(ctx, rootInstallation(ns, "tree", fs, true)) })
	}
	w.close = func() { t.close() }
	return w
}
