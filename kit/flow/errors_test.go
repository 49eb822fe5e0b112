package flow

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// TestTaxonomy: kind, reason and codes are those of the first *Error in the
// chain, however deeply wrapped; any other error is transient, without a
// reason, with ERR_INTERNAL_PROBLEM.
func TestTaxonomy(t *testing.T) {
	cause := errors.New("connection refused")
	wrap := func(err error) error { return fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", err)) }
	cases := []struct {
		name       string
		err        error
		kind       Kind
		reason     string
		codes      []lsv1alpha1.ErrorCode
		stalled    bool
		waiting    bool
		wantString string
	}{
		{
			name: "plain error", err: cause, kind: Transient, reason: "Fallback",
			codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem}, wantString: "Transient",
		},
		{
			name: "stalled", err: Stalledf("InvalidConfiguration", "spec.target %q is no name", "A B"), kind: Stalled,
			reason: "InvalidConfiguration", codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem},
			stalled: true, wantString: "Stalled",
		},
		{
			name: "stalled, wrapped", err: wrap(StalledError("InvalidBlueprint", cause)), kind: Stalled,
			reason: "InvalidBlueprint", codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}, stalled: true,
		},
		{
			name: "waiting, wrapped", err: wrap(Waitingf("TargetNotFound", "waiting for Target %s", "t")), kind: Waiting,
			reason: "TargetNotFound", codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem},
			waiting: true, wantString: "Waiting",
		},
		{
			name: "transient with codes, wrapped", err: wrap(TransientError("ClusterUnreachable", cause, lsv1alpha1.ErrorTimeout)),
			kind: Transient, reason: "ClusterUnreachable", codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout},
		},
		{
			name: "stalled with a code added", err: StalledError("Forbidden", cause).WithCodes(lsv1alpha1.ErrorInsufficientPermission, lsv1alpha1.ErrorConfigurationProblem),
			kind: Stalled, reason: "Forbidden", stalled: true,
			codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem, lsv1alpha1.ErrorInsufficientPermission},
		},
		{
			name: "no reason given", err: wrap(&Error{Kind: Stalled, Err: cause}), kind: Stalled, reason: "Fallback",
			codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}, stalled: true,
		},
		{
			name: "the outermost *Error decides", err: TransientError("Outer", wrap(StalledError("Inner", cause))),
			kind: Transient, reason: "Outer", codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.err); got != tc.kind {
				t.Errorf("KindOf = %v, want %v", got, tc.kind)
			}
			if tc.wantString != "" && tc.kind.String() != tc.wantString {
				t.Errorf("String() = %q, want %q", tc.kind.String(), tc.wantString)
			}
			if got := ReasonOf(tc.err, "Fallback"); got != tc.reason {
				t.Errorf("ReasonOf = %q, want %q", got, tc.reason)
			}
			if got := CodesOf(tc.err); !slices.Equal(got, tc.codes) {
				t.Errorf("CodesOf = %v, want %v", got, tc.codes)
			}
			if IsStalled(tc.err) != tc.stalled || IsWaiting(tc.err) != tc.waiting {
				t.Errorf("IsStalled = %v, IsWaiting = %v; want %v, %v", IsStalled(tc.err), IsWaiting(tc.err), tc.stalled, tc.waiting)
			}
		})
	}
	if IsStalled(nil) || IsWaiting(nil) {
		t.Error("nil is stalled or waiting")
	}
}

// TestErrorText: the message, when set, is what the user reads; else the
// wrapped error's text. The wrapped error stays reachable.
func TestErrorText(t *testing.T) {
	cause := errors.New("no such key")
	if got := StalledError("R", cause).Error(); got != "no such key" {
		t.Errorf("Error() = %q, want the cause's text", got)
	}
	if got := (&Error{Message: "secret s has no key k", Err: cause}).Error(); got != "secret s has no key k" {
		t.Errorf("Error() = %q, want the message", got)
	}
	if got := Stalledf("R", "field %s: %w", "spec.x", cause).Error(); got != "field spec.x: no such key" {
		t.Errorf("Stalledf text = %q", got)
	}
	if !errors.Is(fmt.Errorf("w: %w", Stalledf("R", "x: %w", cause)), cause) {
		t.Error("the cause is not reachable through the *Error")
	}
}

// TestCodesOfIsACopy: changing the returned codes does not change the error.
func TestCodesOfIsACopy(t *testing.T) {
	err := TransientError("R", errors.New("x"), lsv1alpha1.ErrorTimeout)
	CodesOf(err)[0] = lsv1alpha1.ErrorInsufficientPermission
	if got := CodesOf(err); got[0] != lsv1alpha1.ErrorTimeout {
		t.Errorf("codes changed through CodesOf's result: %v", got)
	}
}
