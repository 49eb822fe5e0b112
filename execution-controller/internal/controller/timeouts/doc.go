// Package timeouts enforces the deploy-item timeouts of the deployer contract
// (seed 001) on every DeployItem, whether an execution created it or not:
//
//   - pickup: reconcile-time older than the pickup timeout → phase Failed,
//     lastError{WaitingForPickup, PickupTimeout, [ERR_TIMEOUT]};
//   - progressing: Init/Progressing for longer than spec.timeout (or the
//     default) since status.lastReconcileTime → operation: abort, abort-time
//     and abort-reason in one write (a deletion is bounded by its deployer
//     instead);
//   - abort: abort-time older than the abort timeout → phase Failed.
//
// Before the pickup timeout fails an item, a Warning event WaitingForPickup
// (on the item and on its Execution) says early, once per hand-over, that no
// deployer has picked it up (pickupwarning.go). The decision is Evaluate
// (evaluate.go), pure; the actions are in timeout_actions.go.
//
// It never polls: every reconcile computes when the item's next timeout
// expires and asks for exactly that RequeueAfter.
//
// Writing phase and lastError is normally the deployer's job; failing an item
// on timeout is the one documented exception (BRIEF, "Deploy items and jobs"),
// done with a merge patch touching only phase, lastError and jobIDFinished,
// guarded by the resourceVersion so a deployer's concurrent final write wins.
//
// Invariants:
//   - An item is failed or aborted only after a live read confirms the
//     timeout is due; every write is guarded so that a deployer's
//     concurrent write wins.
//   - The reconciler keeps no state but the pickup warnings emitted (in
//     memory, once per hand-over).
package timeouts
