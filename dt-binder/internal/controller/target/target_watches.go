package target

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
)

// targetsForClaim maps a claim event to the targets whose claimRef names it
// and the target its spec.targetName names: their phase depends on the claim.
func (r *Reconciler) targetsForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*appstudiov1alpha1.DeploymentTargetClaim)
	if !ok {
		return nil
	}
	reqs := r.targetsNaming(ctx, c.Namespace, c.Name)
	if c.Spec.TargetName != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.TargetName}})
	}
	return reqs
}

// targetsForSpaceRequest maps a SpaceRequest to the targets it backs: those
// naming it in the spacerequest annotation and those naming the claim it is
// labelled with. A deleting target waits for it.
func (r *Reconciler) targetsForSpaceRequest(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if claim := appstudiov1alpha1.ClaimOf(o); claim != "" {
		reqs = r.targetsNaming(ctx, o.GetNamespace(), claim)
	}
	var list appstudiov1alpha1.DeploymentTargetList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{binding.TargetSpaceRequestIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping SpaceRequest to targets", "spaceRequest", o.GetName())
	}
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func (r *Reconciler) targetsNaming(ctx context.Context, namespace, claim string) []reconcile.Request {
	targets, err := binding.TargetsNamingClaim(ctx, r.Client, namespace, claim)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping to targets")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(targets))
	for i := range targets {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&targets[i])})
	}
	return reqs
}
