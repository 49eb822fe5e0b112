package installation

import (
	"fmt"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
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
	// Interval is the interval used; Clamped says it was raised to MinInterval.
	Interval time.Duration
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
		field, iv, def = "spec.automaticReconcile.succeededReconcile.interval", in.Spec.SucceededReconcile.Interval, DefaultSucceededReconcileInterval
	case (in.Phase == lsv1alpha1.PhaseFailed || in.Phase == lsv1alpha1.PhaseDeleteFailed) && in.Spec.FailedReconcile != nil:
		field, iv, def = "spec.automaticReconcile.failedReconcile.interval", in.Spec.FailedReconcile.Interval, DefaultFailedReconcileInterval
		p.OnFailed, p.Limit = true, in.Spec.FailedReconcile.NumberOfReconciles
	default:
		return p
	}
	interval, err := parseInterval(field, iv, def)
	if err != nil {
		return autoPlan{Action: autoInvalid, Err: err}
	}
	if interval < in.MinInterval {
		interval, p.Clamped = in.MinInterval, true
	}
	p.Interval = interval
	if p.OnFailed {
		p.Count = failedInARow(in) + 1
		if p.Limit != nil && p.Count > *p.Limit {
			p.Action, p.Count = autoExhausted, p.Count-1
			return p
		}
	}
	p.At = in.FinishedAt.Add(interval)
	p.Action = autoWait
	if !in.Now.Before(p.At) {
		p.Action = autoStart
	}
	return p
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
