package installation

import (
	"strings"
	"testing"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestCronNext(t *testing.T) {
	// A Thursday.
	from := time.Date(2026, 1, 1, 8, 7, 30, 0, time.UTC)
	for _, c := range []struct {
		spec string
		want time.Time
	}{
		{"* * * * *", time.Date(2026, 1, 1, 8, 8, 0, 0, time.UTC)},
		{"0 * * * *", time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.Date(2026, 1, 1, 8, 15, 0, 0, time.UTC)},
		{"30 2 * * *", time.Date(2026, 1, 2, 2, 30, 0, 0, time.UTC)},
		{"0 0 * * mon", time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)},
		{"0 0 * * 7", time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC)},
		{"0 0 1 feb *", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		{"5,10-12 8 * * *", time.Date(2026, 1, 1, 8, 10, 0, 0, time.UTC)},
		// Both day fields restricted: either matches (the 3rd, a Saturday, or a Friday).
		{"0 0 3 * fri", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
	} {
		s, err := parseCron(c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		got, ok := s.next(from)
		if !ok || !got.Equal(c.want) {
			t.Errorf("%q: next = %s, %v; want %s", c.spec, got, ok, c.want)
		}
	}
	never, err := parseCron("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := never.next(from); ok {
		t.Errorf("February 30th matched %s", got)
	}
}

func TestCronParseErrorsNameTheField(t *testing.T) {
	for spec, want := range map[string]string{
		"* * * *":       "needs 5 fields",
		"60 * * * *":    "minute field \"60\"",
		"* 24 * * *":    "hour field",
		"* * 0 * *":     "day of month field",
		"* * * 13 *":    "month field",
		"* * * * 8":     "day of week field",
		"*/0 * * * *":   "step \"0\"",
		"5-1 * * * *":   "runs backwards",
		"* * * foo * *": "needs 5 fields",
		"x * * * *":     "\"x\" is not a value from 0 to 59",
	} {
		_, err := parseCron(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", spec, err, want)
		}
	}
}

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
