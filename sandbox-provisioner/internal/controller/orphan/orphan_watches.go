package orphan

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

func (r *Reconciler) claimToSpaceRequests(ctx context.Context, o client.Object) []reconcile.Request {
	srs := &toolchainv1alpha1.SpaceRequestList{}
	if err := r.Client.List(ctx, srs, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(o.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing SpaceRequests of a claim", "claim", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(srs.Items))
	for i := range srs.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&srs.Items[i])})
	}
	return reqs
}

func targetToSpaceRequest(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetAnnotations()[appstudiov1alpha1.SpaceRequestAnnotation]
	if name == "" || !sandbox.ProvisionedBySandbox(o) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
