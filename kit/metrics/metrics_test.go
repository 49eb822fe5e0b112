package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPhaseCountsTransitionsAndKeepsOneSeriesPerObject(t *testing.T) {
	r := For("TestKindPhase")
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
