package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// jobStep is one step of a root installation's install job that shows in a
// watch event of the Installation, its Execution or its DeployItem, in the
// order the job passes them. The single workload records when it first sees
// each, so its latency splits into the hops between them: where the time
// of one job goes.
type jobStep int

const (
	stepExecutionCreated jobStep = iota
	stepExecutionHandedJob
	stepItemCreated
	stepItemHandedJob
	stepItemPickedUp // the deployer's metadata patch (finalizer), before its work
	stepItemSucceeded
	stepExecutionSucceeded
	stepInstallationSucceeded
	numJobSteps
)

var jobStepNames = [numJobSteps]string{
	"execution created",
	"execution handed the job",
	"deploy item created",
	"deploy item handed the job",
	"deploy item picked up (finalizer)",
	"deploy item Succeeded",
	"execution Succeeded",
	"installation Succeeded",
}

// stepClock records, per root installation, when each job step was first
// seen. Executions are named after their installation and deploy items
// carry their execution's name in a label, so every event maps to its root.
type stepClock struct {
	stop context.CancelFunc

	mu sync.Mutex
	at map[string]*[numJobSteps]time.Time
}

// clockSteps starts informers for Installations, Executions and DeployItems
// in ns and waits until they have synced.
func (b *bench) clockSteps(ctx context.Context, ns string) (*stepClock, error) {
	sc := &stepClock{at: map[string]*[numJobSteps]time.Time{}}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { sc.observe(o) },
		UpdateFunc: func(_, o any) { sc.observe(o) },
	}
	stop, err := b.startInformers(ctx, ns, handler, &lsv1alpha1.Installation{}, &lsv1alpha1.Execution{}, &lsv1alpha1.DeployItem{})
	if err != nil {
		return nil, err
	}
	sc.stop = stop
	return sc, nil
}

func (sc *stepClock) observe(o any) {
	now := time.Now()
	var root string
	var seen []jobStep
	switch x := o.(type) {
	case *lsv1alpha1.Installation:
		root = x.Name
		if st, _ := jobDone(x); st == done {
			seen = append(seen, stepInstallationSucceeded)
		}
	case *lsv1alpha1.Execution:
		root = x.Name
		seen = append(seen, stepExecutionCreated)
		if x.Status.JobID != "" {
			seen = append(seen, stepExecutionHandedJob)
		}
		if st, _ := jobDone(x); st == done {
			seen = append(seen, stepExecutionSucceeded)
		}
	case *lsv1alpha1.DeployItem:
		root = x.Labels[lsv1alpha1.ManagedByExecutionLabel]
		seen = append(seen, stepItemCreated)
		if x.Status.JobID != "" {
			seen = append(seen, stepItemHandedJob)
		}
		if len(x.Finalizers) > 0 {
			seen = append(seen, stepItemPickedUp)
		}
		if st, _ := jobDone(x); st == done {
			seen = append(seen, stepItemSucceeded)
		}
	}
	if root == "" || len(seen) == 0 {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	steps, ok := sc.at[root]
	if !ok {
		steps = &[numJobSteps]time.Time{}
		sc.at[root] = steps
	}
	for _, s := range seen {
		if steps[s].IsZero() {
			steps[s] = now
		}
	}
}

// hops returns, per step, the time since the step before it (for the first,
// since created) for every root seen through all steps.
func (sc *stepClock) hops(created map[string]time.Time) [numJobSteps][]float64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out [numJobSteps][]float64
	for root, start := range created {
		steps, ok := sc.at[root]
		if !ok || slices.ContainsFunc(steps[:], time.Time.IsZero) {
			continue
		}
		prev := start
		for s, at := range steps {
			out[s] = append(out[s], seconds(at.Sub(prev)))
			prev = at
		}
	}
	return out
}

// close stops the informers; a nil clock (prepare failed) is a no-op.
func (sc *stepClock) close() {
	if sc != nil {
		sc.stop()
	}
}

// stepResult is one hop of the single workload's jobs: from the step
// before (or the create's response) to this one.
type stepResult struct {
	Step   string  `json:"step"`
	P50Sec float64 `json:"p50Seconds"`
	P90Sec float64 `json:"p90Seconds"`
}

func stepResults(hops [numJobSteps][]float64) []stepResult {
	var out []stepResult
	for s, xs := range hops {
		if len(xs) == 0 {
			return nil
		}
		out = append(out, stepResult{Step: jobStepNames[s], P50Sec: percentile(xs, 50), P90Sec: percentile(xs, 90)})
	}
	return out
}

// writeSteps prints where the time of one job goes.
func writeSteps(w io.Writer, steps []stepResult) error {
	p := &printer{w: w}
	p.printf("  where the time goes, hop by hop (first watch event showing each step; p50s do not add up to the latency's p50):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := &printer{w: tw}
	t.printf("    step\tp50 ms\tp90 ms\n")
	for _, s := range steps {
		t.printf("    %s\t%6.1f\t%6.1f\n", s.Step, 1000*s.P50Sec, 1000*s.P90Sec)
	}
	t.flush(tw)
	return errors.Join(p.err, t.err)
}
