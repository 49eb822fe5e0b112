package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terrace-dev/terrace/bench/apirequests"
)

// report is the JSON file of one bench run.
type report struct {
	Started  time.Time   `json:"started"`
	Machine  machineInfo `json:"machine"`
	Commit   string      `json:"commit,omitempty"`
	Flags    string      `json:"flags"`
	QuietFor string      `json:"quietWindow"`
	Results  []*result   `json:"results"`
	// APICost prices single requests (workload apicost).
	APICost []apiCostResult `json:"apiCost,omitempty"`
}

type machineInfo struct {
	CPUs           int    `json:"cpus"`
	CPUModel       string `json:"cpuModel"`
	Memory         string `json:"memory"`
	Kernel         string `json:"kernel"`
	OS             string `json:"os"`
	GoVersion      string `json:"goVersion"`
	LoadAvgAtStart string `json:"loadAvgAtStart"`
}

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
	Error     string       `json:"error,omitempty"`

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
	if len(r.Steps) > 0 && p.err == nil {
		p.err = writeSteps(w, r.Steps)
	}
	p.printf("  API requests by the Terrace processes: %d = %.1f per root object (%d)\n", r.TerraceRequests, r.PerRoot, r.Roots)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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

	p.printf("  Terrace requests by process, verb (apply counts as patch) and resource:  count, per root\n")
	if p.err == nil && t.err == nil {
		p.err = r.counts.Write(w, "    ", float64(r.Roots))
	}

	total := 0
	for _, v := range r.APIServerRequests {
		total += v
	}
	own := 0
	for _, v := range r.BenchRequests {
		own += v
	}
	p.printf("  kube-apiserver apiserver_request_total delta without the bench's own %d requests: %d", own, total)
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
	return errors.Join(t.err, p.err)
}

// writeSummary prints one line per workload.
func (rep *report) writeSummary(w io.Writer) error {
	if len(rep.Results) == 0 {
		return nil
	}
	p := &printer{w: w}
	p.printf("\n=== summary (%d × %s, %s)\n", rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := &printer{w: tw}
	t.printf("workload\troots\tfirst s\thalf s\tall s\tp50 s\tp90 s\trequests/root\tmax controller peak RSS MiB\n")
	for _, r := range rep.Results {
		p50, p90 := "-", "-"
		if len(r.LatenciesSec) > 0 {
			p50, p90 = fmt.Sprintf("%.3f", r.P50Sec), fmt.Sprintf("%.3f", r.P90Sec)
		}
		maxRSS, maxName := 0.0, ""
		for _, p := range r.Processes {
			if !slices.Contains(controlPlane, p.Name) && p.PeakRSSMB > maxRSS {
				maxRSS, maxName = p.PeakRSSMB, p.Name
			}
		}
		name := r.Workload
		if r.Error != "" {
			name += " (FAILED)"
		}
		t.printf("%s\t%5d\t%7.3f\t%7.3f\t%7.3f\t%5s\t%5s\t%8.1f\t%6.1f (%s)\n", name, r.Roots, r.FirstSec, r.HalfSec, r.AllSec, p50, p90, r.PerRoot, maxRSS, maxName)
	}
	t.flush(tw)
	return errors.Join(p.err, t.err)
}

// printer keeps the first write error, so a table is written without an
// error check per line.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); p.err == nil {
		p.err = err
	}
}

// save writes the report as <dir>/<timestamp>.json.
func (rep *report) save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	path := filepath.Join(dir, rep.Started.Format("20060102T150405Z")+".json")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(data, '\n'), 0o600)
}
