package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/terrace-dev/terrace/bench/apirequests"
)

// result is one workload's figures.
type result struct {
	Workload    string `json:"workload"`
	Description string `json:"description"`
	Namespace   string `json:"namespace"`
	// Roots is the number of root objects; per-root figures divide by it.
	Roots int `json:"roots"`
	// Seconds from the first create until the first, half and all root
	// objects (or items) were seen done.
	FirstSec float64 `json:"firstSeconds"`
	HalfSec  float64 `json:"halfSeconds"`
	AllSec   float64 `json:"allSeconds"`
	// Latencies of sequential runs: create's response → done event.
	LatenciesSec []float64 `json:"latencySeconds,omitempty"`
	P50Sec       float64   `json:"p50Seconds,omitempty"`
	P90Sec       float64   `json:"p90Seconds,omitempty"`
	// Steps: where a sequential run's time goes, hop by hop (single).
	Steps []stepResult `json:"steps,omitempty"`
	// QuietSec: from the first create until no Terrace process sent a
	// request for the quiet window (the end of the counting).
	QuietSec float64 `json:"quietSeconds"`

	// TerraceRequests is every request every Terrace process sent (counting
	// FlowSchemas); PerRoot divides it by Roots.
	TerraceRequests   int                 `json:"terraceRequests"`
	PerRoot           float64             `json:"terraceRequestsPerRoot"`
	RequestsByProcess map[string]int      `json:"terraceRequestsByProcess"`
	TerraceBreakdown  []apirequests.Entry `json:"terraceRequestsByVerbResource"`
	// APIServerRequests is the apiserver_request_total delta by verb and
	// resource, minus the bench's own requests: Terrace, kube-controller-
	// manager, kube-apiserver itself (watches count when they end).
	APIServerRequests map[string]int `json:"apiserverRequestTotalDelta"`
	// Conflicts are the requests answered 409 Conflict, by verb and resource
	// (included in the counts above; the bench's own creates never conflict).
	Conflicts map[string]int `json:"conflicts,omitempty"`
	// BenchRequests are the bench client's own (non-watch) requests.
	BenchRequests map[string]int `json:"benchRequests"`
	// OtherFlowSchemas: requests of everyone else by built-in FlowSchema
	// (exempt: the bench and kube-apiserver; kube-system-service-accounts:
	// kube-controller-manager's controllers).
	OtherFlowSchemas map[string]int `json:"otherRequestsByFlowSchema"`

	Processes []procResult `json:"processes"`
	// Registry is what the controllers asked of the OCI registry during the
	// run (component workloads), counted by the bench's proxy.
	Registry *registryFetches `json:"registry,omitempty"`
	Error    string           `json:"error,omitempty"`

	counts apirequests.Counts
}

type procResult struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// CPUSec is utime+stime from the first create until all was done.
	CPUSec float64 `json:"cpuSeconds"`
	// PeakRSSMB is VmHWM, reset before the workload; RSSMB VmRSS after it.
	PeakRSSMB float64 `json:"peakRSSMiB"`
	RSSMB     float64 `json:"rssMiB"`
	Gone      bool    `json:"gone,omitempty"`
}

func (r *result) setTiming(t timing) {
	if n := len(t.doneAt); n > 0 {
		r.FirstSec = seconds(t.doneAt[0].Sub(t.start))
		r.HalfSec = seconds(t.doneAt[(n+1)/2-1].Sub(t.start))
		r.AllSec = seconds(t.doneAt[n-1].Sub(t.start))
	}
	if len(t.latencies) > 0 {
		for _, l := range t.latencies {
			r.LatenciesSec = append(r.LatenciesSec, seconds(l))
		}
		r.P50Sec = percentile(r.LatenciesSec, 50)
		r.P90Sec = percentile(r.LatenciesSec, 90)
	}
	r.Steps = t.steps
}

// percentile is the nearest-rank percentile.
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// write prints the workload's tables.
func (r *result) write(w io.Writer) error {
	p := &printer{w: w}
	r.writeTimes(p)
	if len(r.Steps) > 0 && p.err == nil {
		p.err = writeSteps(w, r.Steps)
	}
	if r.Registry != nil {
		p.printf("  %s\n", r.Registry)
	}
	p.printf("  API requests by the Terrace processes: %d = %.1f per root object (%d)\n", r.TerraceRequests, r.PerRoot, r.Roots)
	tableErr := r.writeProcesses(p)
	p.printf("  Terrace requests by process, verb (apply counts as patch) and resource:  count, per root\n")
	if p.err == nil && tableErr == nil {
		p.err = r.counts.Write(w, "    ", float64(r.Roots))
	}
	r.writeAPIServerRequests(p)
	return errors.Join(tableErr, p.err)
}

// writeTimes prints the heading, the failure, the wall times and latencies.
func (r *result) writeTimes(p *printer) {
	p.printf("\n=== %s — %s (namespace %s)\n", r.Workload, r.Description, r.Namespace)
	if r.Error != "" {
		p.printf("  FAILED: %s\n", r.Error)
	}
	p.printf("  wall time    first %.3f s   half %.3f s   all %.3f s   (from the first create; counting ended %.1f s after it, %s after the last Terrace request)\n",
		r.FirstSec, r.HalfSec, r.AllSec, r.QuietSec, quietWindow)
	if len(r.LatenciesSec) > 0 {
		p.printf("  latency      p50 %.3f s   p90 %.3f s   min %.3f s   max %.3f s   (%d runs, create response → watch event)\n",
			r.P50Sec, r.P90Sec, slices.Min(r.LatenciesSec), slices.Max(r.LatenciesSec), len(r.LatenciesSec))
	}
}

// writeProcesses prints the table of requests, CPU and memory per process;
// the table's write error is its own, p keeps the footnote's.
func (r *result) writeProcesses(p *printer) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	t := &printer{w: tw}
	t.printf("  process\trequests\tper root\tCPU s\tpeak RSS MiB\n")
	for _, proc := range r.Processes {
		reqs, per := "-", "-"
		if n, ok := r.RequestsByProcess[proc.Name]; ok || !slices.Contains(controlPlane, proc.Name) {
			reqs, per = fmt.Sprintf("%8d", n), fmt.Sprintf("%8.2f", float64(n)/float64(r.Roots))
		}
		if proc.Gone {
			t.printf("  %s\t%s\t%s\tgone\tgone\n", proc.Name, reqs, per)
			continue
		}
		t.printf("  %s\t%8s\t%8s\t%6.2f\t%8.1f\n", proc.Name, reqs, per, proc.CPUSec, proc.PeakRSSMB)
	}
	n, withTarget := r.RequestsByProcess[targetIdentity]
	if withTarget {
		t.printf("  %s *\t%8d\t%8.2f\t\t\n", targetIdentity, n, float64(n)/float64(r.Roots))
	}
	t.flush(tw)
	if withTarget {
		p.printf("  * what the manifest deployer sent with the Target's credentials (applying the manifests)\n")
	}
	return t.err
}

// writeAPIServerRequests prints kube-apiserver's own counts: everyone's
// requests but the bench's, the conflicts among them, the largest kinds.
func (r *result) writeAPIServerRequests(p *printer) {
	p.printf("  kube-apiserver apiserver_request_total delta without the bench's own %d requests: %d", sum(r.BenchRequests), sum(r.APIServerRequests))
	if len(r.OtherFlowSchemas) > 0 {
		var parts []string
		for _, fs := range slices.Sorted(maps.Keys(r.OtherFlowSchemas)) {
			parts = append(parts, fmt.Sprintf("%s %d", fs, r.OtherFlowSchemas[fs]))
		}
		p.printf(" (non-Terrace by FlowSchema: %s)", strings.Join(parts, ", "))
	}
	p.printf("\n")
	if len(r.Conflicts) > 0 {
		var parts []string
		for _, k := range apirequests.SortedByCount(r.Conflicts) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Conflicts[k]))
		}
		p.printf("    of which 409 Conflict: %s\n", strings.Join(parts, ", "))
	}
	keys := apirequests.SortedByCount(r.APIServerRequests)
	const top = 12
	for i, k := range keys {
		if i == top {
			p.printf("    … %d more kinds (see the JSON)\n", len(keys)-top)
			break
		}
		p.printf("    %6d  %s\n", r.APIServerRequests[k], k)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
