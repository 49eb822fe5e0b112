package extension

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

//nolint:staticcheck // Requeue is deprecated in controller-runtime, but seed 003 defines the rules with it.
func res(abort bool, requeue bool, after time.Duration) *HookResult {
	return &HookResult{AbortReconcile: abort, ReconcileResult: reconcile.Result{Requeue: requeue, RequeueAfter: after}}
}

// TestAggregateHookResults has one row per aggregation rule of seed 003.
func TestAggregateHookResults(t *testing.T) {
	tests := []struct {
		rule string
		ht   HookType
		in   []*HookResult
		want *HookResult
	}{
		{"all results nil: nil", BeforeReconcileHook, []*HookResult{nil, nil}, nil},
		{"no results: nil", EndHook, nil, nil},
		{"exactly one non-nil: a copy of it", BeforeReconcileHook, []*HookResult{nil, res(true, false, 3*time.Second), nil}, res(true, false, 3*time.Second)},
		{"exactly one non-nil with AND type: still a copy", ShouldReconcileHook, []*HookResult{nil, res(true, false, 0)}, res(true, false, 0)},
		{"AbortReconcile is ORed: one true gives true", BeforeAnyReconcileHook, []*HookResult{res(false, false, 0), res(true, false, 0)}, res(true, false, 0)},
		{"AbortReconcile is ORed: all false gives false", StartHook, []*HookResult{res(false, false, 0), res(false, false, 0)}, res(false, false, 0)},
		{"DuringResponsibilityCheck ANDs AbortReconcile: one false enforces continuation", DuringResponsibilityCheckHook, []*HookResult{res(true, false, 0), res(false, false, 0)}, res(false, false, 0)},
		{"DuringResponsibilityCheck ANDs AbortReconcile: all true gives true", DuringResponsibilityCheckHook, []*HookResult{res(true, false, 0), res(true, false, 0)}, res(true, false, 0)},
		{"ShouldReconcile ANDs AbortReconcile: one false enforces continuation", ShouldReconcileHook, []*HookResult{res(false, false, 0), res(true, false, 0)}, res(false, false, 0)},
		{"ShouldReconcile ANDs AbortReconcile: all true gives true", ShouldReconcileHook, []*HookResult{res(true, false, 0), res(true, false, 0)}, res(true, false, 0)},
		{"Requeue is ORed", EndHook, []*HookResult{res(false, false, 0), res(false, true, 0)}, res(false, true, 0)},
		{"RequeueAfter is the smallest value greater than zero", EndHook, []*HookResult{res(false, false, 5*time.Second), res(false, false, 0), res(false, false, 2*time.Second)}, res(false, false, 2*time.Second)},
		{"Requeue true forces RequeueAfter to zero", AfterResponsibilityCheckHook, []*HookResult{res(false, true, 0), res(false, false, 4*time.Second)}, res(false, true, 0)},
		{"nil results are ignored among several non-nil ones", BeforeDeleteHook, []*HookResult{nil, res(false, false, time.Minute), nil, res(true, false, time.Hour)}, res(true, false, time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			got := AggregateHookResults(tt.ht, tt.in...)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for _, in := range tt.in {
				if got != nil && got == in {
					t.Fatal("the result aliases an input; it must be a copy")
				}
			}
		})
	}
}

func TestRegisterHook(t *testing.T) {
	calls := 0
	hook := func(context.Context, logr.Logger, *lsv1alpha1.DeployItem, *lsv1alpha1.Target, HookType) (*HookResult, error) {
		calls++
		return nil, nil
	}
	hooks := ReconcileExtensionHooks{}
	if got := hooks.RegisterHook(hook); len(got) != 0 {
		t.Fatalf("registering without hook types changed the hooks: %v", got)
	}
	hooks.RegisterHook(hook, StartHook, EndHook).RegisterHookSetup(ReconcileExtensionHookSetup{Hook: hook, HookTypes: []HookType{EndHook}})
	if len(hooks[StartHook]) != 1 || len(hooks[EndHook]) != 2 {
		t.Fatalf("hooks = %v", hooks)
	}
	if _, err := hooks.ExecuteHooks(context.Background(), logr.Discard(), nil, nil, EndHook); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
}

func TestExecuteHooksErrorIgnoresResults(t *testing.T) {
	boom := errors.New("boom")
	second := false
	hooks := ReconcileExtensionHooks{}.
		RegisterHook(func(context.Context, logr.Logger, *lsv1alpha1.DeployItem, *lsv1alpha1.Target, HookType) (*HookResult, error) {
			return res(true, true, 0), boom
		}, BeforeReconcileHook).
		RegisterHook(func(context.Context, logr.Logger, *lsv1alpha1.DeployItem, *lsv1alpha1.Target, HookType) (*HookResult, error) {
			second = true
			return nil, nil
		}, BeforeReconcileHook)
	got, err := hooks.ExecuteHooks(context.Background(), logr.Discard(), nil, nil, BeforeReconcileHook)
	if !errors.Is(err, boom) || got != nil {
		t.Fatalf("got %v, %v; want nil, boom", got, err)
	}
	if second {
		t.Fatal("hooks after a failing one ran")
	}
}
