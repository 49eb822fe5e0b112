package timeouts

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/flow"
)

// act carries the due action out and reports it.
func (r *Reconciler) act(ctx context.Context, s *scope) (flow.Result, error) {
	live, d := s.item, s.d
	log := ctrl.LoggerFrom(ctx).WithValues("action", d.Action.String(), "jobID", live.Status.JobID)
	var err error
	switch d.Action {
	case ActionFailPickup:
		if err = r.fail(ctx, live, lsv1alpha1.Error{
			Operation: lsv1alpha1.OperationWaitingForPickup,
			Reason:    lsv1alpha1.ReasonPickupTimeout,
			Message:   fmt.Sprintf("no deployer has reconciled this deployitem within %d seconds", int64(d.Timeout.Seconds())),
			Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout},
		}, lsv1alpha1.ReconcileTimeAnnotation); err == nil {
			log.Info("deploy item failed: pickup timeout")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventPickupTimeout, "Fail",
				"no deployer has reconciled this deploy item within %s", d.Timeout)
		}
	case ActionFailAbort:
		if err = r.fail(ctx, live, lsv1alpha1.Error{
			Operation: lsv1alpha1.OperationWaitingForAbort,
			Reason:    lsv1alpha1.ReasonAbortingTimeout,
			Message:   fmt.Sprintf("deployer has not aborted progressing this deploy item within %d seconds", int64(d.Timeout.Seconds())),
			Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout},
		}, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation); err == nil {
			log.Info("deploy item failed: abort timeout")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventAbortingTimeout, "Fail",
				"the deployer has not aborted this deploy item within %s", d.Timeout)
		}
	case ActionAbort:
		if err = r.abort(ctx, live, d.Timeout); err == nil {
			log.Info("deploy item progressing too long: abort requested")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventProgressingTimeout, "Abort",
				"deploy item has been progressing for longer than %s; aborting", d.Timeout)
		}
	}
	return flow.Stop(), err
}

// fail ends the item's current job as Failed with lastError, then removes the
// annotations that drove the timeout, and any abort request, so a later job
// does not inherit them.
func (r *Reconciler) fail(ctx context.Context, item *lsv1alpha1.DeployItem, lastErr lsv1alpha1.Error, removeAnnotations ...string) error {
	if err := patch.FailItem(ctx, r.Client, r.FieldManager, item, lastErr, r.Now()); err != nil {
		return err
	}
	remove := map[string]*string{}
	for _, k := range removeAnnotations {
		remove[k] = nil
	}
	if lsv1alpha1.Operation(item.Annotations[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationAbort {
		// The job is over: an abort request (say one left over from an
		// earlier job, which Evaluate ignores as stale) has nothing left to
		// abort. It goes with this write rather than stay for ever.
		remove[lsv1alpha1.OperationAnnotation] = nil
		remove[lsv1alpha1.AbortTimeAnnotation] = nil
	}
	if _, ok := item.Annotations[AbortReasonAnnotation]; ok {
		// Goes with the abort request it explains.
		remove[AbortReasonAnnotation] = nil
	}
	return patch.Annotations(ctx, r.Client, r.FieldManager, item, "", remove)
}

// AbortReasonAnnotation says why this controller asked for an abort. It is
// written in the same merge patch as operation: abort and abort-time (no
// extra request) and removed with them, so the deployer can end the item
// with lastError reason ProgressingTimeout and ERR_TIMEOUT (as Landscaper
// reports a progressing timeout) instead of a plain "aborted on request".
// Its value is "<Reason>: <message>", e.g.
// "ProgressingTimeout: the deploy item was progressing for longer than its
// progressing timeout (20s)".
const AbortReasonAnnotation = lsv1alpha1.AbortReasonAnnotation

// abort asks the deployer to stop: operation: abort plus abort-time, which
// starts the abort timeout, and the abort's reason (AbortReasonAnnotation),
// all in one write. The resourceVersion guard keeps it from aborting a job
// that finished a moment ago.
func (r *Reconciler) abort(ctx context.Context, item *lsv1alpha1.DeployItem, progressing time.Duration) error {
	op, at := string(lsv1alpha1.OperationAbort), r.Now().UTC().Format(time.RFC3339)
	why := ProgressingTimeoutAbortReason(progressing)
	return patch.Annotations(ctx, r.Client, r.FieldManager, item, item.ResourceVersion, map[string]*string{
		lsv1alpha1.OperationAnnotation: &op,
		lsv1alpha1.AbortTimeAnnotation: &at,
		AbortReasonAnnotation:          &why,
	})
}

// ProgressingTimeoutAbortReason is the AbortReasonAnnotation value of an
// abort the progressing timeout requested.
func ProgressingTimeoutAbortReason(progressing time.Duration) string {
	return fmt.Sprintf("%s: the deploy item was progressing for longer than its progressing timeout (%s)",
		lsv1alpha1.ReasonProgressingTimeout, progressing)
}
