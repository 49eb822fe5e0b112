package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// workload is one named scenario. prepare creates what the scenario needs
// but does not measure (a Target, a class, the informers observing
// completion); run is timed and measured: it creates the root objects and
// returns once all are done.
type workload struct {
	name        string
	description string
	// roots is the number of root objects, the divisor of "per root".
	roots   int
	prepare func(ctx context.Context, b *bench, ns string) error
	run     func(ctx context.Context, b *bench, ns string) (timing, error)
	// account, when set, adds what the workload observed beside the API
	// requests to res once the processes are quiet; its error fails the run.
	account func(res *result) error
	close   func()
}

// timing is what run observed: when each root object (or item) was done,
// from the first create; latencies for sequential runs.
type timing struct {
	start     time.Time
	doneAt    []time.Time
	latencies []time.Duration
	// steps splits sequential runs' latencies into the hops between the
	// steps of their jobs (single only).
	steps []stepResult
}

// Workload names, as -workloads takes them.
const (
	wSingle = "single"
	wTree   = "tree"
	wChain  = "chain"
	wRoots  = "roots"
	wClaims = "claims"
	// wCrowded is roots again, in a namespace that already holds many
	// Succeeded installations: the time per installation must not grow with
	// the number already there (one of Terrace's performance targets).
	wCrowded = "crowded"
)

// single runs first, on a fresh control plane; apicost right after, on a
// control plane that holds almost nothing yet: its prices are the floor,
// without the heap and watch load the larger workloads leave behind.
var allWorkloads = []string{wSingle, wAPICost, wTree, wChain, wRoots, wCrowded, wClaims, wChartManifest, wHelm, wComponentInline, wComponent}

// defaultSizes are the sizes Terrace's performance targets name; roots runs
// once per size.
var defaultSizes = map[string][]int{
	wSingle: {20},
	wTree:   {3}, // depth (fan-out is 3)
	wChain:  {50},
	wRoots:  {50, 200, 1000},
	// installations already there : installations created at once
	wCrowded: {1000, 200},
	wClaims:  {100},
	// one after the other : created at once
	wHelm:          {20, 100},
	wChartManifest: {20, 100},
	// installations created at once
	wComponent:       {100},
	wComponentInline: {100},
	// requests of each kind
	wAPICost: {500},
}

// treeFanOut is the fan-out of the tree workload.
const treeFanOut = 3

// newWorkloads makes the runs of one named workload from its sizes: roots
// runs once per size, crowded once with both of its sizes, the others once.
func newWorkloads(name string, sizes []int, creators int) []workload {
	switch name {
	case wRoots:
		ws := make([]workload, 0, len(sizes))
		for _, n := range sizes {
			ws = append(ws, rootInstallations(n, creators))
		}
		return ws
	case wCrowded:
		return []workload{crowded(sizes[0], sizes[1], creators)}
	case wHelm, wChartManifest:
		return chartWorkloads(name, sizes, creators)
	}
	return []workload{newWorkload(name, sizes[0], creators)}
}

func newWorkload(name string, n, creators int) workload {
	switch name {
	case wSingle:
		return singleManifest(n)
	case wTree:
		return tree(n, treeFanOut)
	case wChain:
		return chain(n)
	case wClaims:
		return claims(n, creators)
	case wComponent, wComponentInline:
		return componentWorkloads(name, n, creators)
	}
	panic("unknown workload " + name)
}

// parseSizes reads -n: "single=20,roots=50:200:1000,crowded=1000:200,chain=50,claims=100,tree=3,helm=20:100,component=100".
func parseSizes(s string) (map[string][]int, error) {
	out := map[string][]int{}
	for k, v := range defaultSizes {
		out[k] = v
	}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, vals, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("-n %q: want workload=N[:N...]", part)
		}
		if _, known := defaultSizes[name]; !known {
			return nil, fmt.Errorf("-n: unknown workload %q (known: %s)", name, strings.Join(allWorkloads, ", "))
		}
		var sizes []int
		for _, v := range strings.Split(vals, ":") {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
				return nil, fmt.Errorf("-n %s: %q is not a positive number", name, v)
			}
			sizes = append(sizes, n)
		}
		switch {
		case name == wCrowded && len(sizes) != 2:
			return nil, fmt.Errorf("-n %s: two sizes, present:new (e.g. crowded=1000:200)", name)
		case (name == wHelm || name == wChartManifest) && len(sizes) != 2:
			return nil, fmt.Errorf("-n %s: two sizes, one-after-the-other:at-once (e.g. %s=20:100)", name, name)
		case name != wRoots && name != wCrowded && name != wHelm && name != wChartManifest && len(sizes) != 1:
			return nil, fmt.Errorf("-n %s: one size only (roots takes several, separated by ':')", name)
		}
		out[name] = sizes
	}
	return out, nil
}
