package installation

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func (r *Reconciler) successorsOf(ctx context.Context, o client.Object) []ctrl.Request {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	return r.requestsFor(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
}

// wakeOnDeletion enqueues, for a deleted installation, the installations
// that export what it imported and its sub-installations.
func (r *Reconciler) wakeOnDeletion(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	inst, ok := e.Object.(*lsv1alpha1.Installation)
	if !ok {
		return
	}
	for _, req := range r.requestsFor(ctx, inst.Namespace, ExportsIndex, importKeys(inst), inst.Name) {
		q.Add(req)
	}
	for _, req := range r.requestsFor(ctx, inst.Namespace, ParentIndex, []string{inst.Name}, inst.Name) {
		q.Add(req)
	}
}

// importersAndWaiters maps a DataObject or Target to the installations
// importing it and to those whose job waits for it to go (nameWaits): its
// deletion frees the name their export or context copy is written under.
func (r *Reconciler) importersAndWaiters(key func(string) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		k := key(o.GetName())
		reqs := r.requestsFor(ctx, o.GetNamespace(), ImportsIndex, []string{k}, "")
		return append(reqs, r.waits.waiters(o.GetNamespace(), k)...)
	}
}

func (r *Reconciler) requestsFor(ctx context.Context, ns, index string, keys []string, except string) []ctrl.Request {
	seen := map[string]bool{}
	var reqs []ctrl.Request
	for _, k := range keys {
		list := &lsv1alpha1.InstallationList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{index: k}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing installations by index", "index", index, "key", k)
			continue
		}
		for i := range list.Items {
			n := list.Items[i].Name
			if n != except && !seen[n] {
				seen[n] = true
				reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}})
			}
		}
	}
	return reqs
}
