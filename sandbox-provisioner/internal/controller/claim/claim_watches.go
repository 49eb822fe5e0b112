package claim

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

func spaceRequestToClaim(_ context.Context, o client.Object) []reconcile.Request {
	name := appstudiov1alpha1.ClaimOf(o)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func targetToClaim(_ context.Context, o client.Object) []reconcile.Request {
	dt, ok := o.(*appstudiov1alpha1.DeploymentTarget)
	if !ok || !sandbox.ProvisionedBySandbox(dt) || dt.Spec.ClaimRef == nil || dt.Spec.ClaimRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: dt.Namespace, Name: dt.Spec.ClaimRef.Name}}}
}

func (r *Reconciler) classToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &appstudiov1alpha1.DeploymentTargetClaimList{}
	if err := r.Client.List(ctx, claims); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims for a class change", "class", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.DeploymentTargetClassName == o.GetName() && sandbox.WantsSandbox(c) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}
