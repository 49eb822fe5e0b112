package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// checkWanted stops unless the claim still waits for a sandbox target: marked
// for this provisioner, not being deleted, not naming another target in
// spec.targetName, not bound, not lost (a lost claim is not re-provisioned:
// its target was deleted on purpose).
func (r *Reconciler) checkWanted(ctx context.Context, s *scope) (flow.Result, error) {
	c := s.claim
	var why string
	switch {
	case !sandbox.WantsSandbox(c):
		why = "not marked for " + appstudiov1alpha1.SandboxProvisioner
	case !c.DeletionTimestamp.IsZero():
		why = "being deleted"
	case sandbox.NamesOtherTarget(c):
		// The binder binds such a claim statically, to that target only:
		// a target provisioned now would never be bound (or, held by the
		// claim, would block the static binding), and its SpaceRequest
		// would hold a namespace for nothing. The orphan reconciler deletes
		// a SpaceRequest made before spec.targetName was set.
		why = "spec.targetName names another target"
	case c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound,
		c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] == appstudiov1alpha1.AnnotationTrue:
		why = "bound"
	case c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseLost:
		why = "lost"
	default:
		return flow.Continue(), nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("nothing to provision", "reason", why)
	// It no longer waits: what it was told is history.
	r.warnings.forget(client.ObjectKeyFromObject(c))
	return flow.Stop(), nil
}
