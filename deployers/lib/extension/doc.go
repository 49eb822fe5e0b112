// Package extension holds the deployer library's extension hooks (seed 003):
// functions a deployer registers to run at fixed places of the library's
// reconcile flow, and the rules by which their results are aggregated.
//
// The hooks are active: lib.Reconciler calls every registered hook at its
// place in the flow and lets the aggregated HookResult steer the flow.
//
// Aggregation (AggregateHookResults), exactly as seed 003 writes it:
//   - all results nil: the result is nil;
//   - exactly one result non-nil: the result is a copy of it;
//   - otherwise AbortReconcile is ORed (ANDed for DuringResponsibilityCheck
//     and ShouldReconcile, where false enforces continuation),
//     ReconcileResult.Requeue is ORed, ReconcileResult.RequeueAfter is the
//     smallest value greater than zero, and it is zero when Requeue is true
//     (an immediate requeue).
//
// Invariants:
//   - Hooks of one type run in registration order; the first error stops
//     them and its result is ignored.
//   - A hook's result only steers the flow and the requeue; a hook error is
//     an ExtensionHook Event on the item and ends the reconcile, retried
//     with back-off.
package extension
