package flow

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Result is what a step asks of the list: go on or stop, and whether the
// object should be reconciled again after a delay.
type Result struct {
	stop         bool
	requeueAfter time.Duration
}

// Continue lets the next step run.
func Continue() Result { return Result{} }

// Stop ends the list without an error: the reconcile has nothing more to do
// now (done, or waiting for a watch event to bring the object back).
func Stop() Result { return Result{stop: true} }

// RequeueAfter returns r asking, in addition, to be reconciled again after d
// (a non-positive d asks nothing).
func (r Result) RequeueAfter(d time.Duration) Result {
	if d > 0 {
		r.requeueAfter = d
	}
	return r
}

// Stopped reports whether the list ends at this result.
func (r Result) Stopped() bool { return r.stop }

// After is the delay after which the object is to be reconciled again; zero
// asks for nothing.
func (r Result) After() time.Duration { return r.requeueAfter }

// IsZero reports whether r neither stops nor requeues.
func (r Result) IsZero() bool { return r == Result{} }

// Merge combines two results: the list stops when either stops, and the
// lowest non-zero requeue delay wins.
func (r Result) Merge(o Result) Result {
	return Result{stop: r.stop || o.stop, requeueAfter: lowestNonZero(r.requeueAfter, o.requeueAfter)}
}

// Ctrl is r as controller-runtime's result.
func (r Result) Ctrl() ctrl.Result { return ctrl.Result{RequeueAfter: r.requeueAfter} }

// MergeCtrl merges controller-runtime results by the same rule as Merge.
func MergeCtrl(a, b ctrl.Result) ctrl.Result {
	return ctrl.Result{RequeueAfter: lowestNonZero(a.RequeueAfter, b.RequeueAfter)}
}

func lowestNonZero(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}

// Step is one step of a reconcile over its scope S.
type Step[S any] func(ctx context.Context, s S) (Result, error)

// Run runs steps in order until one returns an error or stops the list, and
// returns the merge of every result seen (the failing step's included).
func Run[S any](ctx context.Context, s S, steps ...Step[S]) (Result, error) {
	var total Result
	for _, step := range steps {
		res, err := step(ctx, s)
		total = total.Merge(res)
		if err != nil {
			return total, err
		}
		if res.stop {
			return total, nil
		}
	}
	return total, nil
}
