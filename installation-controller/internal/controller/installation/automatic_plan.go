package installation

import (
	"fmt"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/cron"
)

// Landscaper's defaults of spec.automaticReconcile's intervals.
const (
	DefaultSucceededReconcileInterval = 24 * time.Hour
	DefaultFailedReconcileInterval    = 5 * time.Minute
)

// autoAction is what automaticReconcile asks of one reconcile of an idle root.
type autoAction int

const (
	// autoNone: nothing is configured for the phase the last job ended in.
	autoNone autoAction = iota
	// autoWait: the next job is due at autoPlan.At.
	autoWait
	// autoStart: the next job is due now.
	autoStart
	// autoExhausted: failedReconcile.numberOfReconciles jobs followed failed ones.
	autoExhausted
	// autoInvalid: an interval cannot be used (autoPlan.Err).
	autoInvalid
)

// autoInput is what planAutomatic decides from.
type autoInput struct {
	Spec       *lsv1alpha1.AutomaticReconcile
	Status     *lsv1alpha1.AutomaticReconcileStatus
	Phase      lsv1alpha1.Phase
	Generation int64
	// JobID is the job that finished last.
	JobID string
	// FinishedAt is when that job ended.
	FinishedAt  time.Time
	Now         time.Time
	MinInterval time.Duration
}

// autoPlan is planAutomatic's answer.
type autoPlan struct {
	Action autoAction
	// At is when the next job is due.
	At time.Time
	// OnFailed: the next job follows a failed one.
	OnFailed bool
	// Count is the number of automatic jobs in a row after failed ones,
	// the next one included; Limit is failedReconcile.numberOfReconciles.
	Count int32
	Limit *int32
	// Interval is the interval used; Clamped says it (or the cron
	// schedule's first time) was raised to MinInterval.
	Interval time.Duration
	// CronSpec is the schedule used instead of an interval.
	CronSpec string
	Clamped  bool
	Err      error
}

// planAutomatic decides whether an idle root's next automatic job is due.
// The count of jobs after failed ones goes on only while every job since
// was one of them at the same generation: a job started otherwise (the
// reconcile annotation, a spec change) or one that succeeded starts it anew.
func planAutomatic(in autoInput) autoPlan {
	var field string
	var iv *lsv1alpha1.Duration
	var def time.Duration
	p := autoPlan{}
	switch {
	case in.Spec == nil:
		return p
	case in.Phase == lsv1alpha1.PhaseSucceeded && in.Spec.SucceededReconcile != nil:
		field, def = "spec.automaticReconcile.succeededReconcile", DefaultSucceededReconcileInterval
		iv, p.CronSpec = in.Spec.SucceededReconcile.Interval, in.Spec.SucceededReconcile.CronSpec
	case (in.Phase == lsv1alpha1.PhaseFailed || in.Phase == lsv1alpha1.PhaseDeleteFailed) && in.Spec.FailedReconcile != nil:
		field, def = "spec.automaticReconcile.failedReconcile", DefaultFailedReconcileInterval
		iv, p.CronSpec = in.Spec.FailedReconcile.Interval, in.Spec.FailedReconcile.CronSpec
		p.OnFailed, p.Limit = true, in.Spec.FailedReconcile.NumberOfReconciles
	default:
		return p
	}
	if p.OnFailed {
		p.Count = failedInARow(in) + 1
		if p.Limit != nil && p.Count > *p.Limit {
			p.Action, p.Count = autoExhausted, p.Count-1
			return p
		}
	}
	at, err := p.due(in, field, iv, def)
	if err != nil {
		return autoPlan{Action: autoInvalid, Err: err}
	}
	p.At, p.Action = at, autoWait
	if !in.Now.Before(p.At) {
		p.Action = autoStart
	}
	return p
}

// due is when the next job is due: the first time of the cron schedule, or
// the interval, after the last job ended, and never before MinInterval has
// passed.
func (p *autoPlan) due(in autoInput, field string, iv *lsv1alpha1.Duration, def time.Duration) (time.Time, error) {
	if p.CronSpec != "" {
		c, err := cron.Parse(p.CronSpec)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s.cronSpec %q: %w", field, p.CronSpec, err)
		}
		at := c.Next(in.FinishedAt)
		if !at.IsZero() && at.Sub(in.FinishedAt) < in.MinInterval {
			// Next is strictly after its argument: at >= FinishedAt+MinInterval.
			at = c.Next(in.FinishedAt.Add(in.MinInterval - time.Nanosecond))
			p.Clamped, p.Interval = true, in.MinInterval
		}
		if at.IsZero() {
			return time.Time{}, fmt.Errorf("%s.cronSpec %q matches no time in the next %d years", field, p.CronSpec, cron.HorizonYears)
		}
		return at, nil
	}
	interval, err := parseInterval(field+".interval", iv, def)
	if err != nil {
		return time.Time{}, err
	}
	if interval < in.MinInterval {
		interval, p.Clamped = in.MinInterval, true
	}
	p.Interval = interval
	return in.FinishedAt.Add(interval), nil
}

// failedInARow is the number of automatic jobs after failed ones that led
// to the job that finished last.
func failedInARow(in autoInput) int32 {
	st := in.Status
	if st == nil || !st.OnFailed || st.Generation != in.Generation || st.JobID != in.JobID {
		return 0
	}
	return st.NumberOfReconciles
}

func parseInterval(field string, iv *lsv1alpha1.Duration, def time.Duration) (time.Duration, error) {
	if iv == nil || *iv == "" {
		return def, nil
	}
	d, err := time.ParseDuration(string(*iv))
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration: %w", field, string(*iv), err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s %q must be positive", field, string(*iv))
	}
	return d, nil
}
