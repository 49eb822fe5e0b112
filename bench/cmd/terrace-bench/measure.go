package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/terrace-dev/terrace/bench/apirequests"
)

// measure runs one workload in a fresh namespace: prepare, wait until the
// Terrace processes are quiet, take the baseline, run (timed), wait until
// they are quiet again, and take the counts.
func (b *bench) measure(ctx context.Context, w workload) *result {
	res := &result{Workload: w.name, Description: w.description, Roots: w.roots}
	fmt.Fprintf(os.Stderr, "==> %s: %s\n", w.name, w.description)
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if w.close != nil {
		defer w.close()
	}
	if err := b.measureInto(ctx, w, res); err != nil {
		res.Error = err.Error()
		if errors.Is(err, context.Canceled) {
			res.Error = "interrupted (" + res.Error + ")"
		}
	}
	return res
}

// measureInto fills res; an error ends the measurement and replaces any
// error of the run in res.
func (b *bench) measureInto(ctx context.Context, w workload, res *result) error {
	res.Namespace = b.nextNamespace(w.name)
	if err := b.prepare(ctx, w, res.Namespace); err != nil {
		return err
	}
	base, err := b.baseline(ctx)
	if err != nil {
		return err
	}

	tm, runErr := w.run(ctx, b, res.Namespace)
	// CPU is counted until all is done (not through the quiet wait, whose
	// /metrics scrapes cost kube-apiserver CPU of their own).
	procDone := b.sampleProcs()
	res.setTiming(tm)
	if runErr != nil {
		res.Error = runErr.Error()
	}
	if err := b.count.WaitQuiet(ctx, quietWindow, quietTimeout); err != nil {
		res.Error = strings.TrimPrefix(res.Error+"; after the run: "+err.Error(), "; ")
	}
	after, err := b.count.Scrape(ctx)
	if err != nil {
		return err
	}
	res.QuietSec = seconds(after.Time.Sub(tm.start))
	procAfter := b.sampleProcs()
	own := b.own.Counts()

	res.setRequests(b.count.Delta(base.metrics, after), base.metrics, after, own)
	res.setProcesses(b.procs, base.procs, procDone, procAfter)
	if w.account != nil {
		if err := w.account(res); err != nil {
			res.Error = strings.TrimPrefix(res.Error+"; "+err.Error(), "; ")
		}
	}
	return nil
}

// prepare creates the workload's namespace and what it needs, and waits
// until the Terrace processes are quiet.
func (b *bench) prepare(ctx context.Context, w workload, ns string) error {
	if err := b.createNamespace(ctx, ns); err != nil {
		return err
	}
	if err := w.prepare(ctx, b, ns); err != nil {
		return fmt.Errorf("preparing: %w", err)
	}
	if err := b.count.WaitQuiet(ctx, quietWindow, quietTimeout); err != nil {
		return fmt.Errorf("before the run: %w", err)
	}
	return nil
}

// baseline is the state of the processes and kube-apiserver's counters
// before a run.
type baseline struct {
	procs   map[int]procSample
	metrics *apirequests.Snapshot
}

// baseline resets the peak RSS and the bench's own request counts, then
// samples the processes and the counters.
func (b *bench) baseline(ctx context.Context) (baseline, error) {
	for _, p := range b.procs {
		resetPeakRSS(p.PID)
	}
	procs := b.sampleProcs()
	metrics, err := b.count.Scrape(ctx)
	if err != nil {
		return baseline{}, err
	}
	b.own.Reset()
	return baseline{procs: procs, metrics: metrics}, nil
}

func (b *bench) sampleProcs() map[int]procSample {
	out := map[int]procSample{}
	for _, p := range b.procs {
		if s, err := readProc(p.PID); err == nil {
			out[p.PID] = s
		}
	}
	return out
}

// setRequests records the requests between before and after: the Terrace
// processes' (counts), everyone's but the bench's own (own), the conflicts,
// and the other FlowSchemas'.
func (r *result) setRequests(counts apirequests.Counts, before, after *apirequests.Snapshot, own map[string]int) {
	r.TerraceRequests = counts.Total()
	r.PerRoot = float64(r.TerraceRequests) / float64(r.Roots)
	r.RequestsByProcess = counts.ByProcess()
	r.TerraceBreakdown = counts.Entries()
	r.counts = counts
	r.APIServerRequests = apirequests.RequestsDelta(before, after, own)
	r.BenchRequests = own
	r.Conflicts = apirequests.ConflictsDelta(before, after)
	r.OtherFlowSchemas = map[string]int{}
	for fs, v := range after.FlowSchemas {
		if strings.HasPrefix(fs, apirequests.NamePrefix) {
			continue
		}
		if n := int(v - before.FlowSchemas[fs]); n > 0 {
			r.OtherFlowSchemas[fs] = n
		}
	}
}

// setProcesses records each process's CPU from before until done and its
// peak RSS; a process missing from a sample is gone.
func (r *result) setProcesses(procs []component, before, done, after map[int]procSample) {
	for _, p := range procs {
		pb, okB := before[p.PID]
		pd, okD := done[p.PID]
		pa, okA := after[p.PID]
		pr := procResult{Name: p.Name, PID: p.PID}
		if okB && okD && okA {
			pr.CPUSec = float64(pd.cpuTicks-pb.cpuTicks) / clockTicks
			pr.PeakRSSMB = float64(max(pa.hwmKB, pd.hwmKB)) / 1024
			pr.RSSMB = float64(pa.rssKB) / 1024
		} else {
			pr.Gone = true
		}
		r.Processes = append(r.Processes, pr)
	}
}

func seconds(d time.Duration) float64 { return d.Seconds() }
