package lib

import (
	"context"
	"errors"
	"slices"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// SetupWithManager registers the controller: deploy items of the deployer's
// type (from the filtered cache), and Targets (mapped to the items naming them,
// so an item waiting for its Target — or for a selector to match — moves).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r == nil || r.items == nil || r.deployer == nil || r.client == nil || r.reader == nil {
		return errors.New("deployer: reconciler not built by lib.New")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.Name).
		WithOptions(controller.Options{
			// Tests (and the benchmark) start several managers with the same
			// deployer in one process; the name only labels metrics and logs.
			SkipNameValidation: ptr.To(true),
		}).
		WatchesRawSource(source.Kind(r.items, &lsv1alpha1.DeployItem{},
			&handler.TypedEnqueueRequestForObject[*lsv1alpha1.DeployItem]{}, relevantChange())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &lsv1alpha1.Target{},
			handler.TypedEnqueueRequestsFromMapFunc(r.itemsForTarget))).
		Complete(r)
}

// relevantChange lets through the updates the contract reacts to and drops
// the rest, notably the deployer's own lastError/providerStatus writes, so a
// changing error message cannot turn into a hot loop. Phase changes pass:
// the Init write of a job start triggers the reconcile that does the work.
func relevantChange() predicate.TypedPredicate[*lsv1alpha1.DeployItem] {
	return predicate.TypedFuncs[*lsv1alpha1.DeployItem]{
		UpdateFunc: func(e event.TypedUpdateEvent[*lsv1alpha1.DeployItem]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.Generation != n.Generation ||
				!mapsEqual(o.Annotations, n.Annotations) ||
				!mapsEqual(o.Labels, n.Labels) ||
				// The deployer's own metadata patch after a job start: a
				// reconcile that read the item before it conflicts on its
				// status write and needs this event to go on.
				!slices.Equal(o.Finalizers, n.Finalizers) ||
				!ptr.Equal(o.DeletionTimestamp, n.DeletionTimestamp) ||
				o.Status.JobID != n.Status.JobID ||
				o.Status.JobIDFinished != n.Status.JobIDFinished ||
				o.Status.Phase != n.Status.Phase
		},
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (r *Reconciler) itemsForTarget(ctx context.Context, t *lsv1alpha1.Target) []reconcile.Request {
	var list lsv1alpha1.DeployItemList
	if err := r.items.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingFields{targetIndex: t.Namespace + "/" + t.Name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing deploy items for target", "target", client.ObjectKeyFromObject(t))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
