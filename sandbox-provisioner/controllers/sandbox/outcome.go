package sandbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ConflictRetry is how soon a reconcile whose guarded write lost a race runs
// again. The newer copy's watch event normally brings the object back
// sooner; this is the fallback. It is not zero so that the retry reads that
// newer copy from the cache, rather than the stale one again.
const ConflictRetry = 500 * time.Millisecond

// Outcome turns the result and error of a reconcile's phases into what the
// reconcile returns, the same way for every reconciler of the provisioner.
//
// The provisioner's writes to objects other controllers also write are
// guarded: finalizer patches by the resourceVersion read, deletions by the
// UID (and resourceVersion) read, so that nothing another writer did in
// between is lost or deleted unseen. Such a write refused with a conflict
// lost an expected race (the dt-binder writes a target at the moment the
// provisioner releases it): it is no failure, so it is logged at V(1) without
// a stack trace, noted on the reconcile's span, not reported, and the
// reconcile runs again on the newer copy. Any other error is reported (an
// Event on the object) and returned, for controller-runtime to log and retry
// with back-off.
func Outcome(ctx context.Context, res ctrl.Result, err error, report func(error)) (ctrl.Result, error) {
	switch {
	case err == nil:
		return res, nil
	case apierrors.IsConflict(err):
		ctrl.LoggerFrom(ctx).V(1).Info("the object changed since it was read; retrying on its newer copy", "error", err.Error())
		trace.SpanFromContext(ctx).AddEvent("conflict")
		if res.RequeueAfter <= 0 || res.RequeueAfter > ConflictRetry {
			res.RequeueAfter = ConflictRetry
		}
		return res, nil
	default:
		if report != nil {
			report(err)
		}
		return res, err
	}
}
