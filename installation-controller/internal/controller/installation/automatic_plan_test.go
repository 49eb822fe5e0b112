package installation

import (
	"strings"
	"testing"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestPlanAutomatic(t *testing.T) {
	finished := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	dur := func(s string) *lsv1alpha1.Duration { d := lsv1alpha1.Duration(s); return &d }
	limit := func(n int32) *int32 { return &n }
	both := &lsv1alpha1.AutomaticReconcile{
		SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: dur("1h")},
		FailedReconcile:    &lsv1alpha1.FailedReconcile{Interval: dur("10m"), NumberOfReconciles: limit(2)},
	}
	retried := func(n int32, gen int64, job string) *lsv1alpha1.AutomaticReconcileStatus {
		return &lsv1alpha1.AutomaticReconcileStatus{Generation: gen, NumberOfReconciles: n, OnFailed: true, JobID: job}
	}
	in := func(spec *lsv1alpha1.AutomaticReconcile, phase lsv1alpha1.Phase, after time.Duration, st *lsv1alpha1.AutomaticReconcileStatus) autoInput {
		return autoInput{Spec: spec, Status: st, Phase: phase, Generation: 3, JobID: "j", FinishedAt: finished, Now: finished.Add(after), MinInterval: time.Second}
	}
	cases := map[string]struct {
		in        autoInput
		action    autoAction
		at        time.Time
		count     int32
		errSubstr string
	}{
		"nothing configured":             {in(nil, lsv1alpha1.PhaseSucceeded, time.Hour, nil), autoNone, time.Time{}, 0, ""},
		"succeeded, only failed set":     {in(&lsv1alpha1.AutomaticReconcile{FailedReconcile: both.FailedReconcile}, lsv1alpha1.PhaseSucceeded, 48*time.Hour, nil), autoNone, time.Time{}, 0, ""},
		"succeeded, not yet due":         {in(both, lsv1alpha1.PhaseSucceeded, 59*time.Minute, nil), autoWait, finished.Add(time.Hour), 0, ""},
		"succeeded, due":                 {in(both, lsv1alpha1.PhaseSucceeded, time.Hour, nil), autoStart, finished.Add(time.Hour), 0, ""},
		"succeeded, default 24h":         {in(&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{}}, lsv1alpha1.PhaseSucceeded, time.Hour, nil), autoWait, finished.Add(24 * time.Hour), 0, ""},
		"failed, first retry waits":      {in(both, lsv1alpha1.PhaseFailed, time.Minute, nil), autoWait, finished.Add(10 * time.Minute), 1, ""},
		"failed, default 5m":             {in(&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{}}, lsv1alpha1.PhaseFailed, 5*time.Minute, nil), autoStart, finished.Add(5 * time.Minute), 1, ""},
		"delete failed is retried":       {in(both, lsv1alpha1.PhaseDeleteFailed, time.Hour, nil), autoStart, finished.Add(10 * time.Minute), 1, ""},
		"second retry counts on":         {in(both, lsv1alpha1.PhaseFailed, time.Hour, retried(1, 3, "j")), autoStart, finished.Add(10 * time.Minute), 2, ""},
		"limit reached":                  {in(both, lsv1alpha1.PhaseFailed, time.Hour, retried(2, 3, "j")), autoExhausted, time.Time{}, 2, ""},
		"spec changed: count anew":       {in(both, lsv1alpha1.PhaseFailed, time.Hour, retried(2, 2, "j")), autoStart, finished.Add(10 * time.Minute), 1, ""},
		"other job since: count anew":    {in(both, lsv1alpha1.PhaseFailed, time.Hour, retried(2, 3, "other")), autoStart, finished.Add(10 * time.Minute), 1, ""},
		"after succeeded one: count new": {in(both, lsv1alpha1.PhaseFailed, time.Hour, &lsv1alpha1.AutomaticReconcileStatus{Generation: 3, JobID: "j"}), autoStart, finished.Add(10 * time.Minute), 1, ""},
		"zero retries allowed":           {in(&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{NumberOfReconciles: limit(0)}}, lsv1alpha1.PhaseFailed, time.Hour, nil), autoExhausted, time.Time{}, 0, ""},
		"short interval raised":          {in(&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: dur("10ms")}}, lsv1alpha1.PhaseSucceeded, 0, nil), autoWait, finished.Add(time.Second), 0, ""},
		"overflowing interval":           {in(&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: dur("99999999999h")}}, lsv1alpha1.PhaseSucceeded, 0, nil), autoInvalid, time.Time{}, 0, "succeededReconcile.interval \"99999999999h\" is not a duration"},
		"zero interval":                  {in(&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{Interval: dur("0s")}}, lsv1alpha1.PhaseFailed, 0, nil), autoInvalid, time.Time{}, 0, "must be positive"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := planAutomatic(c.in)
			if p.Action != c.action || !p.At.Equal(c.at) || p.Count != c.count {
				t.Fatalf("plan = action %d at %s count %d, want action %d at %s count %d (err %v)", p.Action, p.At, p.Count, c.action, c.at, c.count, p.Err)
			}
			if c.errSubstr != "" && (p.Err == nil || !strings.Contains(p.Err.Error(), c.errSubstr)) {
				t.Fatalf("error %v, want one containing %q", p.Err, c.errSubstr)
			}
		})
	}
}

// A raised interval says so, naming the flag that raised it.
func TestDescribePlanNamesTheMinimumIntervalFlag(t *testing.T) {
	d := lsv1alpha1.Duration("10ms")
	p := planAutomatic(autoInput{
		Spec:  &lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: &d}},
		Phase: lsv1alpha1.PhaseSucceeded, MinInterval: time.Minute,
	})
	if got := describePlan(p); !strings.Contains(got, FlagMinAutomaticReconcileInterval) || !strings.Contains(got, "1m0s") {
		t.Fatalf("describePlan = %q, want the flag and the raised interval", got)
	}
}
