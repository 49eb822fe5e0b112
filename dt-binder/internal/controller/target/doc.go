// Package target is the dt-binder's DeploymentTarget reconciler (seed 004).
//
// It writes a target's status (phase, conditions): whether it is Available,
// Bound to the claim its claimRef names, Released, or — while being deleted —
// Failed because its SpaceRequest could not be terminated. Its only other
// writes apply a reclaimPolicy for a claim that does not need the target any
// more (a claim deleted without its finalizer running, or bound to another
// target): clear the claimRef (Retain) or delete the target (Delete).
//
// Where each rule lives:
//   - target_controller.go: Reconcile and the step lists (live, deleting);
//   - target_phases.go: the target phases Available, Bound, Released, Pending;
//   - target_reclaim.go: the reclaimPolicy for a claim gone or bound elsewhere;
//   - target_deletion.go: a target being deleted, Failed on UnableToTerminate;
//   - target_watches.go, target_status.go, target_events.go.
//
// Invariants:
//   - it never writes a target's finalizers: claimRef belongs to the claim
//     reconciler and the provisioner, the finalizer to the provisioner; it
//     clears a claimRef only for a claim that is gone or bound elsewhere;
//   - the status is written at most once per reconcile (twice when a target
//     is deleted by its policy: its status first, so the write proves the
//     cached copy current), guarded by the resourceVersion read;
//   - a Released target is never bound again automatically, and a claim of
//     the same name created later does not inherit a target recorded for an
//     earlier claim object;
//   - Ready is derived from Bound and Terminating in the same write.
package target
