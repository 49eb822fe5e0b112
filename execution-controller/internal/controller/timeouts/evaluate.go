package timeouts

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Timeout is a duration that "none" disables: the syntax of the timeout
// flags and of spec.timeout (kit/timeout, shared with the deployers).
type Timeout = timeout.Timeout

// Config holds the three deploy-item timeouts and the pickup warning.
type Config struct {
	// Pickup bounds how long reconcile-time may stay on an item.
	Pickup Timeout
	// PickupWarning is how long reconcile-time may stay on an item before a
	// Warning event (EventWaitingForPickup) says no deployer has picked it
	// up, once per hand-over; zero means DefaultPickupWarning. No warning
	// when it is not shorter than the pickup timeout: the timeout says it.
	PickupWarning Timeout
	// Progressing is the default progressing timeout for items without spec.timeout.
	Progressing Timeout
	// Abort bounds how long an item may take to abort after operation: abort.
	Abort Timeout
}

// Defaults of the timeouts (seed 001).
const (
	DefaultPickupTimeout      = 5 * time.Minute
	DefaultProgressingTimeout = 10 * time.Minute
	DefaultAbortTimeout       = 5 * time.Minute
)

// DefaultConfig returns the seed's defaults.
func DefaultConfig() Config {
	return Config{
		Pickup:        timeout.After(DefaultPickupTimeout),
		PickupWarning: timeout.After(DefaultPickupWarning),
		Progressing:   timeout.After(DefaultProgressingTimeout),
		Abort:         timeout.After(DefaultAbortTimeout),
	}
}

// Action is what Evaluate decides to do with a deploy item.
type Action int

// Actions.
const (
	// ActionNone: nothing is due (maybe later, see Decision.RequeueAfter).
	ActionNone Action = iota
	// ActionFailPickup: no deployer removed reconcile-time in time.
	ActionFailPickup
	// ActionAbort: the item is progressing for too long; ask the deployer to abort.
	ActionAbort
	// ActionFailAbort: the deployer did not finish aborting in time.
	ActionFailAbort
)

func (a Action) String() string {
	switch a {
	case ActionFailPickup:
		return "FailPickup"
	case ActionAbort:
		return "Abort"
	case ActionFailAbort:
		return "FailAbort"
	default:
		return "None"
	}
}

// Decision is the outcome of Evaluate.
type Decision struct {
	// Action is due now.
	Action Action
	// Timeout is the timeout that expired (for messages), when Action is not ActionNone.
	Timeout time.Duration
	// RequeueAfter is when the next timeout of the item expires; zero means
	// no timeout is pending. Only meaningful with ActionNone. It includes
	// the pickup warning while that is still to come.
	RequeueAfter time.Duration
	// PickupOverdue is set when the item has waited for its pickup for
	// longer than the pickup warning (and its pickup timeout has not expired).
	PickupOverdue *PickupWait
}

// ErrBadTimestamp is wrapped by Evaluate when an annotation holds no RFC 3339 time.
var ErrBadTimestamp = errors.New("annotation is not an RFC 3339 time")

// Evaluate decides which timeout, if any, has expired for item at now, or
// when the next one will. It is pure: the reconciler acts on the decision.
// Problems with individual annotations are returned as an error beside a
// decision that ignores the broken annotation, so one bad value does not
// disable the other checks.
func Evaluate(item *lsv1alpha1.DeployItem, now time.Time, cfg Config) (Decision, error) {
	var next wake
	overdue, failPickup, err := evaluatePickup(item, now, cfg, &next)
	if failPickup {
		return Decision{Action: ActionFailPickup, Timeout: cfg.Pickup.Duration}, nil
	}
	errs := []error{err}
	// Only install jobs are aborted (seed 001: items "stuck in Progressing").
	// A deletion is bounded by its deployer, from the deletion's start, and
	// ends DeleteFailed; deployers do not abort deletions.
	running := item.Status.Phase == lsv1alpha1.PhaseInit ||
		item.Status.Phase == lsv1alpha1.PhaseProgressing
	d := Decision{}
	if running {
		d, err = evaluateRunning(item, now, cfg, &next)
		errs = append(errs, err)
	}
	d.PickupOverdue = overdue
	if d.Action == ActionNone {
		d.RequeueAfter = next.after
	}
	return d, errors.Join(errs...)
}

// wake is the earliest of the delays after which a timeout of the item
// expires.
type wake struct{ after time.Duration }

func (w *wake) at(d time.Duration) {
	if w.after == 0 || d < w.after {
		w.after = d
	}
}

// evaluatePickup checks the pickup timeout and the pickup warning:
// reconcile-time is stamped on hand-over and removed by the deployer on
// pickup; its age is how long no deployer has reacted.
func evaluatePickup(item *lsv1alpha1.DeployItem, now time.Time, cfg Config, next *wake) (overdue *PickupWait, fail bool, err error) {
	warnAfter, warn := cfg.pickupWarning()
	if !cfg.Pickup.Disabled && warnAfter >= cfg.Pickup.Duration {
		warn = false
	}
	v, ok := item.GetAnnotations()[lsv1alpha1.ReconcileTimeAnnotation]
	if !ok || (cfg.Pickup.Disabled && !warn) {
		return nil, false, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, false, fmt.Errorf("%s=%q: %w", lsv1alpha1.ReconcileTimeAnnotation, v, ErrBadTimestamp)
	}
	if st := item.Status; jobid.LeftoverPickupStamp(st.JobID, st.JobIDFinished, pickupTime(st.LastReconcileTime), t) {
		// Left over from the job the item finished (its removal was lost):
		// nothing waits for a pickup; the deployer removes it.
		return nil, false, nil
	}
	var failsAt time.Time
	if !cfg.Pickup.Disabled {
		failsAt = t.Add(cfg.Pickup.Duration)
		left := failsAt.Sub(now)
		if left <= 0 {
			return nil, true, nil
		}
		next.at(left)
	}
	// The warning's wake-up is computed from the stamp like the timeout's:
	// a healthy item is picked up long before it, and that reconcile then
	// finds no stamp and does nothing.
	if warn {
		if left := t.Add(warnAfter).Sub(now); left > 0 {
			next.at(left)
		} else {
			overdue = &PickupWait{Stamp: v, Since: t, FailsAt: failsAt}
		}
	}
	return overdue, false, nil
}

// evaluateRunning checks the progressing and abort timeouts of an item
// running an install job.
func evaluateRunning(item *lsv1alpha1.DeployItem, now time.Time, cfg Config, next *wake) (Decision, error) {
	var errs []error
	if lsv1alpha1.Operation(item.GetAnnotations()[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationAbort {
		// Already aborting: only the abort timeout is left to watch - once
		// it has started. It starts with abort-time, which this controller
		// writes with its own abort request. A user's operation: abort
		// carries none (Landscaper, too, runs the abort timeout only on an
		// abort-time): then the progressing timeout still applies, and when
		// it expires its abort request writes abort-time, which starts the
		// abort timeout. Were the abort branch taken without one, an item
		// whose deployer never reacts would have no timeout left at all.
		// A stale abort-time (an earlier job's) does not count either.
		at, started, err := currentAbortTime(item)
		errs = append(errs, err)
		if started {
			if cfg.Abort.Disabled {
				return Decision{}, errors.Join(errs...)
			}
			left := at.Add(cfg.Abort.Duration).Sub(now)
			if left <= 0 {
				return Decision{Action: ActionFailAbort, Timeout: cfg.Abort.Duration}, errors.Join(errs...)
			}
			next.at(left)
			return Decision{}, errors.Join(errs...)
		}
	}
	progressing := cfg.Progressing
	if item.Spec.Timeout != nil && *item.Spec.Timeout != "" {
		t, err := timeout.Parse(string(*item.Spec.Timeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.timeout: %w", err))
		} else {
			progressing = t
		}
	}
	if !progressing.Disabled && item.Status.LastReconcileTime != nil {
		left := item.Status.LastReconcileTime.Add(progressing.Duration).Sub(now)
		if left <= 0 {
			return Decision{Action: ActionAbort, Timeout: progressing.Duration}, errors.Join(errs...)
		}
		next.at(left)
	}
	return Decision{}, errors.Join(errs...)
}

// currentAbortTime is the item's abort-time, with ok, when it belongs to the
// item's current job. It is not ok when it is absent (a user's operation:
// abort carries none), not an RFC 3339 time (returned as an error too, and
// ignored so the other checks still run), or older than the start of the
// current job (status.lastReconcileTime). Such a stale stamp is left over
// from an earlier job, whose failure was written but whose annotations were
// not removed (the removal is a second write, which can fail); it must not
// fail the new job at once: the new job's own progressing timeout applies
// (and, when due, stamps a fresh abort-time).
func currentAbortTime(item *lsv1alpha1.DeployItem) (at time.Time, ok bool, err error) {
	v, found := item.GetAnnotations()[lsv1alpha1.AbortTimeAnnotation]
	if !found {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s=%q: %w", lsv1alpha1.AbortTimeAnnotation, v, ErrBadTimestamp)
	}
	if item.Status.LastReconcileTime != nil && t.Before(item.Status.LastReconcileTime.Time) {
		return time.Time{}, false, nil
	}
	return t, true, nil
}

// pickupTime is t's time, zero for nil.
func pickupTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
