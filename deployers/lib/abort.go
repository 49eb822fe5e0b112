package lib

import (
	"context"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// AbortReasonAnnotation says why the execution controller asked for an abort
// (lsv1alpha1.AbortReasonAnnotation).
const AbortReasonAnnotation = lsv1alpha1.AbortReasonAnnotation

// runAbort calls the deployer's Abort (span "DeployItem.Abort") after the
// BeforeAbort hooks; once it is done the job ends Failed and the abort
// request's annotations go.
func (r *Reconciler) runAbort(ctx context.Context, s *scope) (flow.Result, error) {
	if stop, err := r.runHooks(ctx, s, extension.BeforeAbortHook); err != nil || stop {
		return flow.Stop(), err
	}
	actx, span := tracing.StartStep(ctx, tracer(), Kind, "Abort", AttrDeployer.String(r.opts.Name))
	req := r.request(s, false)
	res, err := r.call(actx, func(ctx context.Context) (Result, error) { return r.deployer.Abort(ctx, req) })
	tracing.EndStep(span, err)
	if err == nil && res.Pending {
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: res.RequeueAfter})
		return flow.Continue(), nil
	}
	reason, msg, codes := abortError(s.item)
	if err != nil {
		msg += "; clean-up failed: " + err.Error()
	}
	s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation, AbortReasonAnnotation)
	r.fail(s, OperationAbort, reason, msg, codes)
	return flow.Continue(), nil
}

// abortError is the lastError of an aborted job. An abort the execution
// controller's progressing timeout requested ends as Landscaper reports a
// progressing timeout (reason ProgressingTimeout, ERR_TIMEOUT), the timeout
// in the message; any other abort (a user's) is "aborted on request"
// (ERR_INTERRUPTED). The reason annotation counts only beside an abort-time
// of the current job (not older than its start): one left over from an
// earlier job does not turn a user's abort into a timeout.
func abortError(di *lsv1alpha1.DeployItem) (reason, msg string, codes []lsv1alpha1.ErrorCode) {
	why, ok := di.Annotations[AbortReasonAnnotation]
	if ok {
		at, err := time.Parse(time.RFC3339, di.Annotations[lsv1alpha1.AbortTimeAnnotation])
		ok = err == nil && (di.Status.LastReconcileTime == nil || !at.Before(di.Status.LastReconcileTime.Time))
	}
	if ok {
		if r, detail, found := strings.Cut(why, ": "); found && r == ReasonProgressingTimeout {
			return ReasonProgressingTimeout, "aborted by the execution controller: " + detail,
				[]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}
		}
	}
	msg = "aborted on request (operation: abort)"
	if ok && why != "" {
		msg += ": " + why
	}
	return ReasonAborted, msg, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}
}
