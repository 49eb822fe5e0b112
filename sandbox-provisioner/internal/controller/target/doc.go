// Package target looks after the DeploymentTargets the sandbox-provisioner
// created: it keeps their finalizer while they live, and when one is deleted
// it deletes the target's SpaceRequest, waits until the SpaceRequest is gone
// (the SpaceRequest controller removes the namespace first), and only then
// releases the target by removing the finalizer. It never writes target
// status: the binder reports Failed when the SpaceRequest cannot terminate.
//
// A target carrying the finalizer is looked after whatever its annotations
// say now: one whose provisioned-by annotation was edited away must still be
// released when deleted. Its SpaceRequest is deleted only if it is one the
// provisioner made (labelled with its claim).
//
// A SpaceRequest deleted out of band (by anyone but this reconciler) while
// its target lives leaves the target, possibly Bound, pointing at a
// namespace that is going: a Warning Event on the target says so, once per
// deletion seen. The target is not deleted: it belongs to its claim, and its
// class's reclaimPolicy decides when the claim goes.
//
// The reconcile is the list of steps in target_controller.go: for a live
// target finalizer.go (keep the finalizer) and outofband.go (a SpaceRequest
// deleted by someone else); for a deleted one deprovision.go (delete the
// SpaceRequest, wait until the API server confirms it gone) and finalizer.go
// (release the target).
//
// Invariants:
//   - The finalizer is removed only after the API server, not only the cache,
//     shows the SpaceRequest gone (or it is not the provisioner's).
//   - Finalizer writes are guarded by the resourceVersion read, deletions by
//     the UID read: another writer's change is never lost; a conflict reruns
//     the reconcile on the newer copy (flow.Outcomes).
//   - SpaceRequestUnableToTerminate is recorded once per episode,
//     SpaceRequestDeletedOutOfBand once per deletion seen.
package target
