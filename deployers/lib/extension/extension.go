package extension

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// HookType says where in the reconcile flow a hook runs.
type HookType string

// Hook types, in the order the flow reaches them.
const (
	// StartHook runs at the very beginning; item and target are nil.
	StartHook HookType = "Start"
	// DuringResponsibilityCheckHook can overwrite the responsibility check: a
	// non-nil result with AbortReconcile false makes the deployer responsible,
	// true makes it not responsible.
	DuringResponsibilityCheckHook HookType = "DuringResponsibilityCheck"
	// AfterResponsibilityCheckHook runs once the deployer is responsible.
	AfterResponsibilityCheckHook HookType = "AfterResponsibilityCheck"
	// ShouldReconcileHook can enforce a reconcile (AbortReconcile false) that
	// the default logic would skip; it cannot skip one the default logic needs.
	ShouldReconcileHook HookType = "ShouldReconcile"
	// BeforeAnyReconcileHook runs before whichever of Abort, ForceReconcile,
	// Delete or Reconcile is called.
	BeforeAnyReconcileHook HookType = "BeforeAnyReconcile"
	// BeforeAbortHook runs before the deployer's Abort.
	BeforeAbortHook HookType = "BeforeAbort"
	// BeforeForceReconcileHook runs before the deployer's ForceReconcile.
	BeforeForceReconcileHook HookType = "BeforeForceReconcile"
	// BeforeDeleteHook runs before the deployer's Delete.
	BeforeDeleteHook HookType = "BeforeDelete"
	// BeforeReconcileHook runs before the deployer's Reconcile.
	BeforeReconcileHook HookType = "BeforeReconcile"
	// EndHook runs after the deployer-specific code has returned.
	EndHook HookType = "End"
)

// AllHookTypes lists every hook type in flow order.
var AllHookTypes = []HookType{
	StartHook, DuringResponsibilityCheckHook, AfterResponsibilityCheckHook, ShouldReconcileHook,
	BeforeAnyReconcileHook, BeforeAbortHook, BeforeForceReconcileHook, BeforeDeleteHook,
	BeforeReconcileHook, EndHook,
}

// HookResult is what a hook returns to steer the flow.
type HookResult struct {
	// ReconcileResult is returned by Reconcile if no error occurs.
	ReconcileResult reconcile.Result
	// AbortReconcile ends the reconcile (returning ReconcileResult) after the
	// hooks of the current type have run.
	AbortReconcile bool
}

// ReconcileExtensionHook is a hook function. For StartHook item and target
// are nil; target is nil whenever the item names none (or it does not exist).
type ReconcileExtensionHook func(ctx context.Context, log logr.Logger, item *lsv1alpha1.DeployItem, target *lsv1alpha1.Target, ht HookType) (*HookResult, error)

// ReconcileExtensionHooks maps hook types to the hook functions registered for them.
type ReconcileExtensionHooks map[HookType][]ReconcileExtensionHook

// ReconcileExtensionHookSetup couples a hook function with the hook types it is meant for.
type ReconcileExtensionHookSetup struct {
	Hook      ReconcileExtensionHook
	HookTypes []HookType
}

// RegisterHook appends hook to the list of every given hook type and returns
// hooks for chaining. Without hook types it has no effect. Hooks must be
// registered before the deployer starts.
func (hooks ReconcileExtensionHooks) RegisterHook(hook ReconcileExtensionHook, hts ...HookType) ReconcileExtensionHooks {
	for _, ht := range hts {
		hooks[ht] = append(hooks[ht], hook)
	}
	return hooks
}

// RegisterHookSetup registers setup.Hook for setup.HookTypes.
func (hooks ReconcileExtensionHooks) RegisterHookSetup(setup ReconcileExtensionHookSetup) ReconcileExtensionHooks {
	return hooks.RegisterHook(setup.Hook, setup.HookTypes...)
}

// ExecuteHooks runs every hook of type ht in registration order and returns
// their aggregated result. The first error stops the run: seed 003 ignores
// the hook results then, and the caller returns the error.
func (hooks ReconcileExtensionHooks) ExecuteHooks(ctx context.Context, log logr.Logger, item *lsv1alpha1.DeployItem, target *lsv1alpha1.Target, ht HookType) (*HookResult, error) {
	fns := hooks[ht]
	if len(fns) == 0 {
		return nil, nil
	}
	results := make([]*HookResult, 0, len(fns))
	for i, fn := range fns {
		res, err := fn(ctx, log.WithValues("hookType", string(ht), "hookIndex", i), item, target, ht)
		if err != nil {
			return nil, fmt.Errorf("%s hook #%d: %w", ht, i, err)
		}
		results = append(results, res)
	}
	return AggregateHookResults(ht, results...), nil
}

// andAbort reports whether AbortReconcile is ANDed for hook type ht.
func andAbort(ht HookType) bool {
	return ht == DuringResponsibilityCheckHook || ht == ShouldReconcileHook
}

// AggregateHookResults aggregates results of hooks of type ht by the rules of
// seed 003 (see the package documentation). The library also uses it to fold
// each hook type's result into the result of the whole reconcile, with ht the
// type of the hooks that just ran.
func AggregateHookResults(ht HookType, results ...*HookResult) *HookResult {
	var nonNil []*HookResult
	for _, r := range results {
		if r != nil {
			nonNil = append(nonNil, r)
		}
	}
	switch len(nonNil) {
	case 0:
		return nil
	case 1:
		c := *nonNil[0]
		return &c
	}
	out := &HookResult{AbortReconcile: andAbort(ht)}
	for _, r := range nonNil {
		if andAbort(ht) {
			out.AbortReconcile = out.AbortReconcile && r.AbortReconcile
		} else {
			out.AbortReconcile = out.AbortReconcile || r.AbortReconcile
		}
		//nolint:staticcheck // Requeue is deprecated in controller-runtime, but seed 003's rules are written in terms of it.
		out.ReconcileResult.Requeue = out.ReconcileResult.Requeue || r.ReconcileResult.Requeue
		if ra := r.ReconcileResult.RequeueAfter; ra > 0 && (out.ReconcileResult.RequeueAfter == 0 || ra < out.ReconcileResult.RequeueAfter) {
			out.ReconcileResult.RequeueAfter = ra
		}
	}
	//nolint:staticcheck // see above
	if out.ReconcileResult.Requeue {
		out.ReconcileResult.RequeueAfter = 0
	}
	return out
}

// MinRequeue merges two reconcile results the way the aggregation does:
// an immediate requeue wins, else the smallest positive RequeueAfter.
func MinRequeue(a, b reconcile.Result) reconcile.Result {
	//nolint:staticcheck // see AggregateHookResults
	if a.Requeue || b.Requeue {
		return reconcile.Result{Requeue: true}
	}
	switch {
	case a.RequeueAfter <= 0:
		return b
	case b.RequeueAfter <= 0:
		return a
	case a.RequeueAfter < b.RequeueAfter:
		return a
	}
	return b
}

// requeueAfter is a helper for hooks: a result that requeues after d without aborting.
func requeueAfter(d time.Duration) *HookResult {
	return &HookResult{ReconcileResult: reconcile.Result{RequeueAfter: d}}
}

// RequeueAfter returns a hook result that requeues the item after d and,
// when abort is true, ends the reconcile.
func RequeueAfter(d time.Duration, abort bool) *HookResult {
	r := requeueAfter(d)
	r.AbortReconcile = abort
	return r
}
