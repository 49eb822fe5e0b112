package lib

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
)

// runStartHooks runs the Start hooks: no item, no target.
func (r *Reconciler) runStartHooks(ctx context.Context, s *scope) (flow.Result, error) {
	return r.hookStep(ctx, s, extension.StartHook)
}

// runAfterResponsibilityHooks runs the AfterResponsibilityCheck hooks.
func (r *Reconciler) runAfterResponsibilityHooks(ctx context.Context, s *scope) (flow.Result, error) {
	return r.hookStep(ctx, s, extension.AfterResponsibilityCheckHook)
}

// runBeforeAnyReconcileHooks runs the BeforeAnyReconcile hooks.
func (r *Reconciler) runBeforeAnyReconcileHooks(ctx context.Context, s *scope) (flow.Result, error) {
	return r.hookStep(ctx, s, extension.BeforeAnyReconcileHook)
}

// runEndHooks runs the End hooks; their AbortReconcile has nothing left to
// end.
func (r *Reconciler) runEndHooks(ctx context.Context, s *scope) (flow.Result, error) {
	if _, err := r.runHooks(ctx, s, extension.EndHook); err != nil {
		return flow.Stop(), err
	}
	return flow.Continue(), nil
}

// hookStep runs the hooks of type ht as a step: their AbortReconcile (or
// error) ends the reconcile.
func (r *Reconciler) hookStep(ctx context.Context, s *scope, ht extension.HookType) (flow.Result, error) {
	stop, err := r.runHooks(ctx, s, ht)
	if err != nil || stop {
		return flow.Stop(), err
	}
	return flow.Continue(), nil
}

// runHooks executes the hooks of type ht, folds their result into the
// reconcile's and reports whether they asked to end the reconcile.
func (r *Reconciler) runHooks(ctx context.Context, s *scope, ht extension.HookType) (bool, error) {
	hr, err := r.executeHooks(ctx, s, ht)
	if err != nil {
		return true, err
	}
	if hr == nil {
		return false, nil
	}
	s.hookResult = extension.AggregateHookResults(ht, s.hookResult, hr)
	return hr.AbortReconcile, nil
}

// executeHooks executes the hooks of type ht; a hook error is an
// ExtensionHook Event on the item (every hook type alike) and ends the
// reconcile with that error (retried with back-off).
func (r *Reconciler) executeHooks(ctx context.Context, s *scope, ht extension.HookType) (*extension.HookResult, error) {
	hr, err := r.hooks.ExecuteHooks(ctx, s.log, s.item, s.target, ht)
	if err != nil && s.item != nil {
		r.event(s, corev1.EventTypeWarning, OperationHook, "%s hook: %v", ht, err)
	}
	return hr, err
}
