// Package orphan deletes SpaceRequests the sandbox-provisioner created that
// nothing will use any more: their claim is gone (or being deleted, or
// replaced by a new claim of the same name, or now names another target in
// spec.targetName, so that the binder binds it to that target only) and no
// DeploymentTarget was made from them. Such a SpaceRequest is deleted
// whatever the class's reclaimPolicy says: the policy is about a claim's
// target, what a bound claim handed out (seed 004: Retain keeps the target
// and what it points to), and this SpaceRequest never backed a target;
// nothing refers to it, and kept it would hold a namespace for ever.
//
// A target made from the SpaceRequest in the moment its claim went (the
// provisioner's cache still showed the claim) was never bound: it is an
// orphan too. It is a target, so its class's reclaimPolicy applies: with
// Delete it is deleted, which deletes the SpaceRequest (package target), and
// a later claim of the same name does not inherit it; with Retain it is kept
// and an event says so. A class that no longer exists counts as Retain, as
// in the dt-binder: deleting what no policy asked to delete is the one
// mistake that cannot be undone.
//
// The race with the provisioner's claim reconciler cannot be closed by
// reading alone: its cache may still show the claim (and the SpaceRequest
// alive) after this reconciler has confirmed with the API server that the
// claim is gone and no target exists, and deleted the SpaceRequest; Kubernetes
// has no transaction across the two objects. So the deletion is made safe
// after the fact: a target created for a SpaceRequest that is being deleted
// or gone, whose claim is gone, and that was never bound (a "late target") is
// deleted as soon as its creation event arrives, whatever its class's
// reclaimPolicy: what Retain would keep, the namespace its credentials point
// to, is already being deleted, and nothing ever used the target. The same
// holds for a claim that names another target: its late target is deleted
// too (the binder would otherwise count it as held by the claim and refuse
// the target the claim names).
//
// The reconcile is the list of steps in orphan_controller.go: claim_use.go
// (is the claim still using the SpaceRequest, first in the cache, then
// confirmed with the API server), spacerequest_cleanup.go (no target made
// from it: delete it), orphan_target.go (a never-bound target made for the
// gone claim: its class's reclaimPolicy); late_target.go handles a target
// made after its SpaceRequest was deleted.
//
// Invariants:
//   - Nothing is deleted before the API server confirms the claim gone (or
//     redirected) and no target in use made from the SpaceRequest.
//   - Deletions are conditioned on the UID read, so an object created anew
//     under the same name is never deleted unseen.
package orphan
