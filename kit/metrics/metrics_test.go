package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// forgetKind deletes, when the test ends, every series of kind the test
// made. The metrics are process-global: without this a second run of the
// test (go test -count=2) would start from the first run's counts.
func forgetKind(t *testing.T, kind string) {
	t.Cleanup(func() {
		only := prometheus.Labels{LabelKind: kind}
		jobsStarted.DeletePartialMatch(only)
		jobsFinished.DeletePartialMatch(only)
		jobDuration.DeletePartialMatch(only)
		phaseTransitions.DeletePartialMatch(only)
		objectPhase.DeletePartialMatch(only)
	})
}

func TestPhaseCountsTransitionsAndKeepsOneSeriesPerObject(t *testing.T) {
	r := For("TestKindPhase")
	forgetKind(t, r.Kind)
	r.Phase("ns", "a", "Init")
	r.Phase("ns", "a", "Init") // no transition
	r.Phase("ns", "a", "Succeeded")
	r.Phase("ns", "b", "Init")

	if got := testutil.ToFloat64(phaseTransitions.WithLabelValues("TestKindPhase", "Init")); got != 2 {
		t.Errorf("transitions to Init = %v, want 2", got)
	}
	if got := testutil.ToFloat64(phaseTransitions.WithLabelValues("TestKindPhase", "Succeeded")); got != 1 {
		t.Errorf("transitions to Succeeded = %v, want 1", got)
	}
	want := `
# HELP terrace_object_phase 1 for the current phase of each object; the series goes when the object goes.
# TYPE terrace_object_phase gauge
terrace_object_phase{kind="TestKindPhase",name="a",namespace="ns",phase="Succeeded"} 1
terrace_object_phase{kind="TestKindPhase",name="b",namespace="ns",phase="Init"} 1
`
	if err := testutil.CollectAndCompare(objectPhase, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	r.Forget("ns", "a")
	r.Forget("ns", "b")
	if n := testutil.CollectAndCount(objectPhase); n != 0 {
		t.Errorf("series left after Forget: %d", n)
	}
}

func TestJobFinishedObservesDuration(t *testing.T) {
	r := For("TestKindJob")
	forgetKind(t, r.Kind)
	r.JobStarted()
	r.JobFinished("Succeeded", 2*time.Second)
	r.JobFinished("Failed", -1)
	if got := testutil.ToFloat64(jobsStarted.WithLabelValues("TestKindJob")); got != 1 {
		t.Errorf("started = %v", got)
	}
	if got := testutil.ToFloat64(jobsFinished.WithLabelValues("TestKindJob", "Failed")); got != 1 {
		t.Errorf("finished Failed = %v", got)
	}
	if n := testutil.CollectAndCount(jobDuration, "terrace_job_duration_seconds"); n != 1 {
		t.Errorf("duration series = %d, want 1 (Failed had no start)", n)
	}
}

func TestJobClock(t *testing.T) {
	var c JobClock
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c.Start(key, "job-1", t0)
	if d := c.Finish(key, "job-1", time.Time{}, t0.Add(1500*time.Millisecond)); d != 1500*time.Millisecond {
		t.Errorf("duration = %v, want the exact 1.5s", d)
	}
	// Forgotten after Finish: the status's start is the fallback.
	if d := c.Finish(key, "job-1", t0, t0.Add(3*time.Second)); d != 3*time.Second {
		t.Errorf("fallback duration = %v", d)
	}
	// Another job's start does not count; no fallback: unknown.
	c.Start(key, "job-1", t0)
	if d := c.Finish(key, "job-2", time.Time{}, t0.Add(time.Second)); d >= 0 {
		t.Errorf("duration of a job never seen = %v, want negative", d)
	}
	c.Start(key, "job-3", t0)
	c.Forget(key)
	if d := c.Finish(key, "job-3", time.Time{}, t0.Add(time.Second)); d >= 0 {
		t.Errorf("duration after Forget = %v, want negative", d)
	}
}

// For creates the job counters of its kind at zero, so that they are there
// before the first job of a (re)started controller.
func TestForCreatesJobCountersAtZero(t *testing.T) {
	r := For("TestKindZero")
	forgetKind(t, r.Kind)
	want := `
# HELP terrace_jobs_finished_total Jobs finished, by object kind and final phase.
# TYPE terrace_jobs_finished_total counter
terrace_jobs_finished_total{kind="TestKindZero",result="Failed"} 0
terrace_jobs_finished_total{kind="TestKindZero",result="Succeeded"} 0
# HELP terrace_jobs_started_total Jobs started, by object kind.
# TYPE terrace_jobs_started_total counter
terrace_jobs_started_total{kind="TestKindZero"} 0
`
	// The other tests' kinds are gone (forgetKind; none runs in parallel).
	if err := testutil.CollectAndCompare(jobsStarted, strings.NewReader(want), "terrace_jobs_started_total"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(jobsFinished, strings.NewReader(want), "terrace_jobs_finished_total"); err != nil {
		t.Error(err)
	}
}
