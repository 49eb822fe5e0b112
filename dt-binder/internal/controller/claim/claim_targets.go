package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/kit/flow"
)

// loadTargets reads the targets naming the claim. While a claimRef write of
// this binder is not yet in the cache, it stops the reconcile: the target's
// update event will bring the claim back (see expectations).
func (r *Reconciler) loadTargets(ctx context.Context, s *scope) (flow.Result, error) {
	if err := r.settleUnknownWrite(ctx, s); err != nil {
		return flow.Continue(), err
	}
	if waiting, err := r.awaitClaimedTarget(ctx, s); waiting || err != nil {
		return flow.Stop(), err
	}
	named, err := binding.TargetsNamingClaim(ctx, r.Client, s.claim.Namespace, s.claim.Name)
	if err != nil {
		return flow.Continue(), err
	}
	s.named = named[:0]
	for i := range named {
		if binding.ForEarlierClaim(&named[i], s.claim) {
			s.earlier = append(s.earlier, named[i])
		} else {
			s.named = append(s.named, named[i])
		}
	}
	return flow.Continue(), nil
}

// settleUnknownWrite: the last claimRef write's outcome is unknown (a
// timeout). It asks the API server, not the cache, whether it was applied
// (this read is made only on this rare path). Applied: wait for the cache to
// show it, as after any write. Not applied: the target was never ours.
func (r *Reconciler) settleUnknownWrite(ctx context.Context, s *scope) error {
	x, ok := r.exp.get(s.key)
	if !ok || !x.unknown {
		return nil
	}
	live := &appstudiov1alpha1.DeploymentTarget{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.key.Namespace, Name: x.target}, live)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("confirming the claimRef write on target %s: %w", x.target, err)
	case err == nil && binding.RecordedClaimUID(live) == string(s.claim.UID):
		// The record, not the claimRef alone, tells: every claimRef
		// write carries it, and the record alone is what a write on a
		// target pre-bound to this claim adds (recordClaim).
		s.log.Info("claimRef write whose outcome was unknown was applied", "target", x.target)
		r.exp.resolve(s.key)
	default:
		s.log.Info("claimRef write whose outcome was unknown was not applied", "target", x.target)
		r.exp.forget(s.key)
	}
	return nil
}

// awaitClaimedTarget reports whether the cache still shows the target this
// binder claimed for the claim at the version before its write.
func (r *Reconciler) awaitClaimedTarget(ctx context.Context, s *scope) (bool, error) {
	x, ok := r.exp.get(s.key)
	if !ok {
		return false, nil
	}
	cached := &appstudiov1alpha1.DeploymentTarget{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.key.Namespace, Name: x.target}, cached)
	switch {
	case err == nil && cached.ResourceVersion == x.staleResourceVersion:
		s.log.V(1).Info("waiting for the cache to show the claimed target", "target", x.target)
		return true, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	r.exp.forget(s.key)
	return false, nil
}
