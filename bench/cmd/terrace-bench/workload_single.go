package main

import (
	"context"
	"fmt"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// singleManifest: one root installation with one manifest item, n times one
// after the other; each latency is from the create's response to the watch
// event showing it Succeeded.
func singleManifest(n int) workload {
	var t *tracker
	var steps *stepClock
	w := workload{
		name:        wSingle,
		description: fmt.Sprintf("one root installation with one manifest item, create → Succeeded, %d times one after the other", n),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if err := b.createTarget(ctx, ns); err != nil {
			return err
		}
		if t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone); err != nil {
			return err
		}
		steps, err = b.clockSteps(ctx, ns)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		tm := timing{start: time.Now()}
		fs := map[string]string{lsv1alpha1.BlueprintFileName: manifestLevel("", 0)}
		createdAt := map[string]time.Time{}
		for i := range n {
			name := fmt.Sprintf("single-%02d", i)
			if err := b.c.Create(ctx, rootInstallation(ns, name, fs, true)); err != nil {
				return tm, err
			}
			created := time.Now()
			createdAt[name] = created
			at, err := t.waitFor(ctx, name)
			if err != nil {
				return tm, err
			}
			tm.latencies = append(tm.latencies, at.Sub(created))
		}
		tm.doneAt = t.times()
		tm.steps = stepResults(steps.hops(createdAt))
		return tm, nil
	}
	w.close = func() {
		t.close()
		steps.close()
	}
	return w
}
