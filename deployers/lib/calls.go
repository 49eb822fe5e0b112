package lib

import (
	"context"
	"errors"
	"fmt"
	"time"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// DefaultCallTimeout bounds one call of a Deployer's method when
// Options.CallTimeout is not set.
const DefaultCallTimeout = 2 * time.Minute

// ReasonCallTimeout is lastError.reason of a Deployer call that did not
// finish within Options.CallTimeout (retried until the item's timeout).
const ReasonCallTimeout = "CallTimeout"

// call runs one call of the Deployer (Reconcile, ForceReconcile, Delete or
// Abort) within the call timeout: a target cluster that answers slowly, or
// trickles its answer byte by byte, holds a worker no longer than that.
func (r *Reconciler) call(ctx context.Context, f func(context.Context) (Result, error)) (Result, error) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	res, err := f(cctx)
	if err == nil {
		return res, nil
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return res, TransientError(ReasonCallTimeout,
			fmt.Errorf("the deployer's call did not finish within %s (--call-timeout), the target cluster answered too slowly: %w", r.opts.CallTimeout, err))
	}
	return res, explainTargetError(err)
}

// explainTargetError gives the refusals of a guarded target client (see
// TargetClientOptions) their own reason, wherever in err's chain they are:
// neither goes away by retrying.
func explainTargetError(err error) error {
	var (
		refused  *AddressRefusedError
		tooLarge *ResponseTooLargeError
	)
	switch {
	case errors.As(err, &refused):
		return &Error{Kind: flow.Stalled, Reason: ReasonTargetAddressRefused, Message: err.Error(), Err: err,
			Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
	case errors.As(err, &tooLarge):
		return &Error{Kind: flow.Stalled, Reason: ReasonTargetResponseTooLarge, Message: err.Error(), Err: err,
			Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
	}
	return err
}
