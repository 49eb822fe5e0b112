package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

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
			res, err := Outcome(context.Background(), c.res, c.err, func(err error) { reported = err })
			if res != c.wantRes || !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Errorf("Outcome = %+v, %v; want %+v, %v", res, err, c.wantRes, c.wantErr)
			}
			if (reported != nil) != c.wantReported || (c.wantReported && !errors.Is(reported, c.err)) {
				t.Errorf("reported %v, want reported: %v", reported, c.wantReported)
			}
		})
	}
}
