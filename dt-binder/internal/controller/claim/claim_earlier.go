package claim

import (
	"context"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
	"github.com/terrace-dev/terrace/kit/flow"
)

// reclaimEarlier applies, to each target bound (or provisioned) for an
// earlier claim object of this claim's name (binding.ForEarlierClaim), what
// the earlier claim's deletion would have applied had its finalizer not been
// removed by force: its class's reclaimPolicy (see reclaimPolicy). Each
// such target records the earlier claim object (that is how it is told from
// this claim's), so the earlier claim held it by a durable fact, as
// binding.ReclaimedTarget requires of a claim's own target: a target that
// only names the claim's name, recording no claim, is never among them.
// Delete deletes it; Retain clears its claimRef (the target reconciler reports it
// Released if it was bound). The claim itself then binds, or is provisioned,
// as any new claim: it never inherits that target. Rare (it takes a forced
// deletion and a claim of the same name), so its requests cost nothing on the
// normal path. The target reconciler applies the same policy (package
// reclaim) to a target whose recorded claim is gone from its cache
// (reclaimGoneClaim) and may do so for this target at the same moment; every
// write is preconditioned, so the second gets a Conflict (retried; the
// target has moved on) or finds the target already deleted (NotFound is no
// error), and the policy is applied once.
func (r *Reconciler) reclaimEarlier(ctx context.Context, s *scope) (flow.Result, error) {
	for i := range s.earlier {
		t := &s.earlier[i]
		if t.DeletionTimestamp != nil {
			continue // already going
		}
		policy, className, err := r.reclaimPolicy(ctx, s, t)
		if err != nil {
			return flow.Continue(), err
		}
		if policy == appstudiov1alpha1.ReclaimPolicyRetain {
			err = r.releaseEarlier(ctx, s, t, className)
		} else {
			err = r.deleteEarlier(ctx, s, t, className)
		}
		if err != nil {
			return flow.Continue(), err
		}
	}
	return flow.Continue(), nil
}

// releaseEarlier clears the claimRef of t, a target of an earlier claim of
// this name (reclaimPolicy Retain).
func (r *Reconciler) releaseEarlier(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget, className string) error {
	old := binding.RecordedClaimUID(t)
	// The API server, not the cache: a cache that has not seen the
	// SpaceRequest's deletion would release the late target to the next
	// claim (rare path: a claim object of this name is gone).
	late, err := reclaim.LateTarget(ctx, r.APIReader, t)
	if err != nil {
		return err
	}
	if late {
		s.log.Info("not releasing a never-bound target of an earlier claim of this name: its SpaceRequest is going, its provisioner deletes it", "target", t.Name, "earlierClaimUID", old)
		return nil
	}
	if err := r.releaseTarget(ctx, t); err != nil {
		return err
	}
	s.log.Info("released a target bound for an earlier claim of this name", "target", t.Name, "class", className, "earlierClaimUID", old)
	r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventEarlierClaimTargetReleased, "Reclaim",
		"Target %s was bound to an earlier claim %s (UID %s), which is gone; released it for that claim (class %s, reclaimPolicy Retain). This claim does not inherit it",
		t.Name, s.claim.Name, old, className)
	return nil
}

// deleteEarlier deletes t, a target of an earlier claim of this name
// (reclaimPolicy Delete).
func (r *Reconciler) deleteEarlier(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget, className string) error {
	old := binding.RecordedClaimUID(t)
	if err := r.deleteTarget(ctx, t); err != nil {
		return err
	}
	s.log.Info("deleting a target bound for an earlier claim of this name", "target", t.Name, "class", className, "earlierClaimUID", old)
	r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventEarlierClaimTargetDeleted, "Reclaim",
		"Target %s was bound to an earlier claim %s (UID %s), which is gone; deleting it for that claim (class %s, reclaimPolicy Delete). This claim does not inherit it",
		t.Name, s.claim.Name, old, className)
	return nil
}
