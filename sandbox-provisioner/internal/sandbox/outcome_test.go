package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

var key = types.NamespacedName{Namespace: "ns", Name: "t"}

// TestOutcome: a conflict (however wrapped) ends the reconcile without an
// error, unreported, to run again soon; any other error is reported and
// returned as it is.
func TestOutcome(t *testing.T) {
	conflict := fmt.Errorf("removing finalizer: %w",
		apierrors.NewConflict(schema.GroupResource{Group: "appstudio.redhat.com", Resource: "deploymenttargets"}, "t", errors.New("modified")))
	other := fmt.Errorf("reading SpaceRequest s: %w", apierrors.NewServiceUnavailable("down"))
	for _, c := range []struct {
		name         string
		res          ctrl.Result
		err          error
		wantRes      ctrl.Result
		wantErr      error
		wantReported bool
	}{
		{name: "success", res: ctrl.Result{RequeueAfter: time.Minute}, wantRes: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "conflict", err: conflict, wantRes: ctrl.Result{RequeueAfter: ConflictRetry}},
		{name: "conflict, later requeue", res: ctrl.Result{RequeueAfter: time.Minute}, err: conflict, wantRes: ctrl.Result{RequeueAfter: ConflictRetry}},
		{name: "conflict, sooner requeue", res: ctrl.Result{RequeueAfter: time.Millisecond}, err: conflict, wantRes: ctrl.Result{RequeueAfter: time.Millisecond}},
		{name: "error", err: other, wantErr: other, wantReported: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var reported error
			var o Outcomes
			res, err := o.Of(context.Background(), key, c.res, c.err, func(err error) { reported = err })
			if res != c.wantRes || !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Errorf("Outcome = %+v, %v; want %+v, %v", res, err, c.wantRes, c.wantErr)
			}
			if (reported != nil) != c.wantReported || (c.wantReported && !errors.Is(reported, c.err)) {
				t.Errorf("reported %v, want reported: %v", reported, c.wantReported)
			}
		})
	}
}

// TestOutcomesConflictStreak: conflicts in a row on one object back off,
// doubling from ConflictRetry up to MaxConflictRetry; the first
// ConflictsBeforeReport-1 are quiet, the ConflictsBeforeReport-th is
// reported (once, wrapping the conflict), and a reconcile that ends otherwise
// (or Forget) starts the count again. Another object's streak is its own.
func TestOutcomesConflictStreak(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "appstudio.redhat.com", Resource: "deploymenttargets"}, "t", errors.New("modified"))
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	var o Outcomes
	var reports []error
	report := func(err error) { reports = append(reports, err) }
	conflictRound := func(key types.NamespacedName) time.Duration {
		t.Helper()
		res, err := o.Of(context.Background(), key, ctrl.Result{}, conflict, report)
		if err != nil {
			t.Fatalf("a conflict returned the error %v", err)
		}
		return res.RequeueAfter
	}

	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := conflictRound(key); got != w {
			t.Errorf("conflict %d in a row: retry after %v, want %v", i+1, got, w)
		}
		wantReports := 0
		if i+1 >= ConflictsBeforeReport {
			wantReports = 1
		}
		if len(reports) != wantReports {
			t.Fatalf("after %d conflicts in a row: reported %v, want %d report(s)", i+1, reports, wantReports)
		}
	}
	if !apierrors.IsConflict(reports[0]) || !strings.Contains(reports[0].Error(), "5 times in a row") {
		t.Errorf("report = %v, want the conflict, counted", reports[0])
	}
	if got := conflictRound(other); got != ConflictRetry {
		t.Errorf("another object's first conflict: retry after %v, want %v", got, ConflictRetry)
	}

	if _, err := o.Of(context.Background(), key, ctrl.Result{}, nil, report); err != nil {
		t.Fatal(err)
	}
	if got := conflictRound(key); got != ConflictRetry {
		t.Errorf("first conflict after a success: retry after %v, want %v", got, ConflictRetry)
	}
	o.Forget(key)
	if got := conflictRound(key); got != ConflictRetry {
		t.Errorf("first conflict after Forget: retry after %v, want %v", got, ConflictRetry)
	}
	if len(o.streaks) != 2 {
		t.Errorf("streaks held for %d objects, want 2 (key and other)", len(o.streaks))
	}
}
