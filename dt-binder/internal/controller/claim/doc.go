// Package claim is the dt-binder's DeploymentTargetClaim reconciler (seed 004).
//
// It owns, on a claim: its status (phase, Bound condition), the
// dt-provisioner, bind-complete and bound-by-controller annotations, and the
// binder's finalizer; on a target: spec.claimRef when it binds or releases
// one, and the target's deletion when the class says Delete. A target's status
// is the target reconciler's (package target).
//
// Where each rule lives:
//   - claim_controller.go: Reconcile and the two step lists (live, deleting);
//   - claim_binding.go: which binding a claim gets (static, held, Lost, best
//     match, provisioning); claim_binding_static.go: spec.targetName;
//     claim_binding_bestmatch.go: the best free target;
//     claim_claimref.go and expectations.go: the race-free claimRef write;
//   - claim_provisioning.go: the dt-provisioner mark (dynamic provisioning);
//   - claim_lost.go: Lost claims; claim_class.go: a missing class;
//   - claim_deletion.go: the claim's deletion, reclaimPolicy Delete/Retain;
//     claim_earlier.go: targets bound for an earlier claim of the same name;
//   - claim_finalizer.go, claim_watches.go, claim_status.go, claim_events.go.
//
// Invariants:
//   - a claim is never deleted without its target being dealt with: the
//     finalizer is on the API server before any target names the claim;
//   - every write is preconditioned on the resourceVersion the decision was
//     made on, so a reconcile working from a stale cache never overwrites a
//     newer state, and of two claims racing for a free target one wins;
//   - one reconcile writes the claim's metadata at most once and its status
//     at most once, at the end, each only when changed;
//   - a claim that has bound never looks for another target: if its target
//     goes, it is Lost (rule B); a bound claim keeps its target across a
//     change of its class or spec.targetName;
//   - a target's reclaimPolicy is that of the target's class, and applies only
//     to a target the claim holds by a durable fact (binding.ReclaimedTarget);
//     a missing class counts as Retain.
package claim
