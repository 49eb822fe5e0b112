package claim

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
)

// claimsForTarget maps a target event (create, update of old and new version,
// delete) to the claims it may matter to: the claim its claimRef names, claims
// naming it in spec.targetName, and — when it is free to bind — the claims of
// its class still looking for a target.
func (r *Reconciler) claimsForTarget(ctx context.Context, o client.Object) []reconcile.Request {
	dt, ok := o.(*appstudiov1alpha1.DeploymentTarget)
	if !ok {
		return nil
	}
	seen := map[types.NamespacedName]struct{}{}
	add := func(name string) {
		seen[types.NamespacedName{Namespace: dt.Namespace, Name: name}] = struct{}{}
	}
	if dt.Spec.ClaimRef != nil && dt.Spec.ClaimRef.Name != "" {
		add(dt.Spec.ClaimRef.Name)
	}
	for _, c := range r.listClaims(ctx, dt.Namespace, binding.ClaimTargetIndex, dt.Name) {
		add(c.Name)
	}
	if binding.Unavailable(dt) == "" {
		for _, c := range r.listClaims(ctx, dt.Namespace, binding.ClaimClassIndex, dt.Spec.DeploymentTargetClassName) {
			if seeksBestMatch(&c) {
				add(c.Name)
			}
		}
	}
	return toRequests(seen)
}

// listClaims lists the cached claims of namespace whose field index holds
// value; a failure is logged (a watch mapping has no error to return).
func (r *Reconciler) listClaims(ctx context.Context, namespace, index, value string) []appstudiov1alpha1.DeploymentTargetClaim {
	var list appstudiov1alpha1.DeploymentTargetClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims", "index", index, "value", value)
	}
	return list.Items
}

// claimsForClass maps a class event to every claim of the class, in every
// namespace: a class appearing unblocks claims waiting for it, and one
// disappearing changes what deletion does.
func (r *Reconciler) claimsForClass(ctx context.Context, o client.Object) []reconcile.Request {
	var claims appstudiov1alpha1.DeploymentTargetClaimList
	if err := r.Client.List(ctx, &claims, client.MatchingFields{binding.ClaimClassIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims by class", "class", o.GetName())
		return nil
	}
	seen := map[types.NamespacedName]struct{}{}
	for i := range claims.Items {
		seen[client.ObjectKeyFromObject(&claims.Items[i])] = struct{}{}
	}
	return toRequests(seen)
}

func toRequests(keys map[types.NamespacedName]struct{}) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(keys))
	for k := range keys {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// seeksBestMatch: a claim that would take any free target of its class.
func seeksBestMatch(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.DeletionTimestamp == nil && c.Spec.TargetName == "" &&
		c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] == "" &&
		!wasBound(c)
}
