package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

const (
	// ConflictRetry is how soon a reconcile whose guarded write lost a race
	// runs again the first time. The newer copy's watch event normally
	// brings the object back sooner; this is the fallback. It is not zero so
	// that the retry reads that newer copy from the cache, rather than the
	// stale one again.
	ConflictRetry = 500 * time.Millisecond
	// MaxConflictRetry caps the retry delay, which doubles with each conflict
	// in a row on the same object.
	MaxConflictRetry = 30 * time.Second
	// ConflictsBeforeReport is the number of conflicts in a row on the same
	// object after which they are no longer an expected race but something
	// the user must see: another writer that keeps changing the object
	// between the provisioner's read and write (a controller fighting over
	// it, a stale admission webhook). From then on each one is logged at the
	// default level, and the one that reaches the number is reported.
	ConflictsBeforeReport = 5
)

// Outcomes turns the result and error of a reconcile's phases into what the
// reconcile returns, the same way for every reconciler of the provisioner,
// remembering the conflicts in a row per object. The zero value is ready to
// use; it is safe for concurrent reconciles.
//
// The provisioner's writes to objects other controllers also write are
// guarded: finalizer patches by the resourceVersion read, deletions by the
// UID (and resourceVersion) read, so that nothing another writer did in
// between is lost or deleted unseen. Such a write refused with a conflict
// lost an expected race (the dt-binder writes a target at the moment the
// provisioner releases it): it is no failure, so it is logged at V(1) without
// a stack trace, noted on the reconcile's span, not reported, and the
// reconcile runs again on the newer copy. A race is lost once or twice; a
// conflict that keeps coming back is not a race, so the retries back off
// (doubling up to MaxConflictRetry) and the ConflictsBeforeReport-th in a row
// is reported and logged where the user looks. Any other error is reported
// (an Event on the object) and returned, for controller-runtime to log and
// retry with back-off.
type Outcomes struct {
	mu sync.Mutex
	// streaks counts the conflicts in a row per object; an object leaves it
	// on its first reconcile that ends otherwise, or by Forget.
	streaks map[types.NamespacedName]int
}

// Of ends the reconcile of the object key.
func (o *Outcomes) Of(ctx context.Context, key types.NamespacedName, res ctrl.Result, err error, report func(error)) (ctrl.Result, error) {
	if !apierrors.IsConflict(err) {
		o.Forget(key)
		if err != nil && report != nil {
			report(err)
		}
		return res, err
	}
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
	if res.RequeueAfter <= 0 || res.RequeueAfter > retry {
		res.RequeueAfter = retry
	}
	return res, nil
}

// Forget drops the streak of key: for an object that is gone.
func (o *Outcomes) Forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.streaks, key)
}

// count adds a conflict to key's streak and returns the streak.
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
