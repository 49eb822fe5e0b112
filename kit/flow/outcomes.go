package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

const (
	// ConflictRetry is how soon a reconcile whose write lost a race runs
	// again the first time. The newer copy's watch event normally comes
	// sooner; this is the fallback. It is not zero so that the retry reads
	// that newer copy from the cache rather than the stale one again.
	ConflictRetry = 500 * time.Millisecond
	// MaxConflictRetry caps the retry delay, which doubles with each
	// conflict in a row on the same object.
	MaxConflictRetry = 30 * time.Second
	// ConflictsBeforeReport is the number of conflicts in a row on one
	// object after which they are no expected race but another writer that
	// keeps changing the object between read and write: from then on each
	// is logged at the default level, and the one reaching the number is
	// reported.
	ConflictsBeforeReport = 5
)

// Outcomes turns the result and error of a reconcile's steps into what the
// reconcile returns, the same way for every reconciler, remembering the
// conflicts in a row per object. The zero value is ready; it is safe for
// concurrent reconciles.
//
//   - no error: the result;
//   - Waiting: no error (the awaited object's event brings the reconcile
//     back), logged at V(1), not reported;
//   - Stalled: reported, not returned: retrying cannot help, and the
//     object's next change brings it back;
//   - a conflict: a lost race, retried on the newer copy after
//     ConflictRetryAfter, logged at V(1) and reported only when it keeps
//     recurring;
//   - anything else: reported and returned, for controller-runtime to log
//     and retry with back-off.
type Outcomes struct {
	mu sync.Mutex
	// streaks counts the conflicts in a row per object; an object leaves it
	// on its first reconcile that ends otherwise, or by Forget.
	streaks map[types.NamespacedName]int
}

// Finish ends the reconcile of the object key. report, when not nil, tells
// the user of a failure (an Event); it is called at most once.
func (o *Outcomes) Finish(ctx context.Context, key types.NamespacedName, res Result, err error, report func(error)) (ctrl.Result, error) {
	if !apierrors.IsConflict(err) {
		o.Forget(key)
	}
	switch {
	case err == nil:
		return res.Ctrl(), nil
	case apierrors.IsConflict(err):
		return o.conflict(ctx, key, res, err, report), nil
	case IsWaiting(err):
		ctrl.LoggerFrom(ctx).V(1).Info("waiting", "reason", ReasonOf(err, ""), "for", err.Error())
		return res.Ctrl(), nil
	case IsStalled(err):
		ctrl.LoggerFrom(ctx).Info("stalled: the configuration must change", "reason", ReasonOf(err, ""), "error", err.Error())
		if report != nil {
			report(err)
		}
		return res.Ctrl(), nil
	default:
		if report != nil {
			report(err)
		}
		return res.Ctrl(), err
	}
}

func (o *Outcomes) conflict(ctx context.Context, key types.NamespacedName, res Result, err error, report func(error)) ctrl.Result {
	streak := o.count(key)
	trace.SpanFromContext(ctx).AddEvent("conflict")
	retry := ConflictRetryAfter(streak)
	log := ctrl.LoggerFrom(ctx)
	if streak < ConflictsBeforeReport {
		log = log.V(1)
	}
	log.Info("the object changed since it was read; retrying on its newer copy",
		"error", err.Error(), "conflictsInARow", streak, "retryAfter", retry.String())
	if streak == ConflictsBeforeReport && report != nil {
		report(fmt.Errorf("the object changed between read and write %d times in a row (another writer keeps changing it); retrying, at most every %s: %w",
			streak, MaxConflictRetry, err))
	}
	return res.Merge(Continue().RequeueAfter(retry)).Ctrl()
}

// Forget drops the streak of key: for an object that is gone.
func (o *Outcomes) Forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.streaks, key)
}

func (o *Outcomes) count(key types.NamespacedName) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streaks == nil {
		o.streaks = map[types.NamespacedName]int{}
	}
	o.streaks[key]++
	return o.streaks[key]
}

// ConflictRetryAfter is the retry delay after the streak-th conflict in a
// row: ConflictRetry, doubled for each earlier one, at most MaxConflictRetry.
func ConflictRetryAfter(streak int) time.Duration {
	d := ConflictRetry
	for i := 1; i < streak && d < MaxConflictRetry; i++ {
		d *= 2
	}
	return min(d, MaxConflictRetry)
}

// Combine is the error a reconcile ends with, from its steps' error and the
// error of its status write: a conflict of the write decides over a step
// that only stopped (stalled, waiting, or a conflict itself); over a step's
// failure it stays silent, as the failure is what is reported.
func Combine(stepErr, writeErr error) error {
	switch {
	case writeErr == nil:
		return stepErr
	case stepErr == nil, apierrors.IsConflict(stepErr), IsStalled(stepErr), IsWaiting(stepErr):
		return writeErr
	case apierrors.IsConflict(writeErr):
		return stepErr
	default:
		return errors.Join(stepErr, writeErr)
	}
}
