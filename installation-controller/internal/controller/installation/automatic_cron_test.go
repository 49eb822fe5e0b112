package installation

import (
	"strings"
	"testing"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// A schedule's first time comes no sooner than the minimum interval after
// the job ended; a schedule that never matches is an invalid plan.
func TestPlanAutomaticWithCronSpec(t *testing.T) {
	finished := time.Date(2026, 1, 1, 8, 59, 30, 0, time.UTC)
	spec := func(cron string) *lsv1alpha1.AutomaticReconcile {
		return &lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{CronSpec: cron}}
	}
	p := planAutomatic(autoInput{Spec: spec("0 * * * *"), Phase: lsv1alpha1.PhaseSucceeded, FinishedAt: finished, Now: finished, MinInterval: time.Second})
	if p.Action != autoWait || !p.At.Equal(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)) || p.Clamped {
		t.Fatalf("plan %+v, want a wait until 09:00", p)
	}
	p = planAutomatic(autoInput{Spec: spec("* * * * *"), Phase: lsv1alpha1.PhaseSucceeded, FinishedAt: finished, Now: finished, MinInterval: 5 * time.Minute})
	if !p.At.Equal(time.Date(2026, 1, 1, 9, 5, 0, 0, time.UTC)) || !p.Clamped {
		t.Fatalf("plan %+v, want 09:05 (raised to the minimum interval)", p)
	}
	p = planAutomatic(autoInput{Spec: spec("0 0 30 2 *"), Phase: lsv1alpha1.PhaseSucceeded, FinishedAt: finished, Now: finished})
	if p.Action != autoInvalid || !strings.Contains(p.Err.Error(), "succeededReconcile.cronSpec \"0 0 30 2 *\" matches no time") {
		t.Fatalf("plan %+v, want invalid", p)
	}
}
