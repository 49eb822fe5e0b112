package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/kit/flow"
)

// bindBestMatch claims the best free target of the claim's class (oldest
// first, then by name), or marks the claim for dynamic provisioning when none
// is free. Racing claims are serialised by the API server: each claimRef write
// is preconditioned on the target's resourceVersion, so of two claims that saw
// the same free target exactly one wins; the other moves on to the next.
func (r *Reconciler) bindBestMatch(ctx context.Context, s *scope) (flow.Result, error) {
	c := s.claim
	var targets appstudiov1alpha1.DeploymentTargetList
	if err := r.Client.List(ctx, &targets, client.InNamespace(c.Namespace),
		client.MatchingFields{binding.TargetClassIndex: c.Spec.DeploymentTargetClassName}); err != nil {
		return flow.Continue(), fmt.Errorf("listing targets of class %s: %w", c.Spec.DeploymentTargetClassName, err)
	}
	candidates := binding.Candidates(c, targets.Items)
	if len(candidates) == 0 {
		markForProvisioning(s)
		return flow.Continue(), nil
	}
	for _, t := range candidates {
		err := r.claimTarget(ctx, s, t)
		if err == nil {
			s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
				fmt.Sprintf("claimed target %s (best match); waiting for it to report Bound", t.Name)+releasedNote(s.named))
			return flow.Continue(), nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return flow.Continue(), err
		}
		s.log.V(1).Info("target taken meanwhile, trying the next", "target", t.Name)
	}
	s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
		fmt.Sprintf("all %d free targets of class %s were claimed by other claims meanwhile; retrying", len(candidates), c.Spec.DeploymentTargetClassName))
	return flow.Continue().RequeueAfter(r.RetryInterval), nil
}
