package claim

import (
	"context"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
	"github.com/terrace-dev/terrace/kit/flow"
)

// loadClass reads the claim's class; a missing one is nil in the scope (the
// class's create event brings the claim back).
func (r *Reconciler) loadClass(ctx context.Context, s *scope) (flow.Result, error) {
	class, err := reclaim.GetClass(ctx, r.Client, s.claim.Spec.DeploymentTargetClassName)
	s.class = class
	return flow.Continue(), err
}

// classMissing stalls a claim that must bind by its class, which does not
// exist: retrying cannot help until the class appears. The claim is Pending,
// ClassNotFound; that condition's Warning Event is the report.
func (s *scope) classMissing() error {
	err := flow.Stalledf(appstudiov1alpha1.BindReasonClassNotFound,
		"DeploymentTargetClass %q does not exist", s.claim.Spec.DeploymentTargetClassName)
	s.pending(err.Reason, err.Error())
	return err
}

// reclaimPolicy is the reclaim policy of target t: that of t's class, the
// class it was bound under (after a class change of the claim, the claim's
// new class says nothing about a target it never provisioned). A class that
// does not exist counts as Retain (reclaim.Policy), with a warning Event.
func (r *Reconciler) reclaimPolicy(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) (appstudiov1alpha1.ReclaimPolicy, string, error) {
	className := t.Spec.DeploymentTargetClassName
	class := s.class
	if className != s.claim.Spec.DeploymentTargetClassName {
		var err error
		if class, err = reclaim.GetClass(ctx, r.Client, className); err != nil {
			return "", className, err
		}
	}
	if class == nil {
		r.Recorder.Eventf(s.claim, t, corev1EventWarning, EventClassNotFound, "Reclaim",
			"DeploymentTargetClass %q of target %s does not exist; retaining the target", className, t.Name)
	}
	return reclaim.Policy(class), className, nil
}
