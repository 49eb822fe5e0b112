package target

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

// spaceRequestEvents enqueues a SpaceRequest's target, and remembers a
// deletion of the SpaceRequest (its transition to being deleted, or its
// disappearance) for the target's reconcile to report if the target lives:
// the deletion is seen once, in its event, so it is reported once, and a
// reconcile without such an event costs nothing. A SpaceRequest already
// being deleted when the cache starts counts as a deletion seen (a process
// that restarts reports it again).
type spaceRequestEvents struct {
	handler.EventHandler
	deletions *byKey[types.UID]
}

func (h spaceRequestEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object.GetDeletionTimestamp() != nil {
		h.seen(e.Object)
	}
	h.EventHandler.Create(ctx, e, q)
}

func (h spaceRequestEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil {
		h.seen(e.ObjectNew)
	}
	h.EventHandler.Update(ctx, e, q)
}

func (h spaceRequestEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.Object)
	h.EventHandler.Delete(ctx, e, q)
}

// seen records the deletion before the target is enqueued, so that the
// reconcile finds it.
func (h spaceRequestEvents) seen(o client.Object) {
	if o.GetLabels()[appstudiov1alpha1.ClaimLabel] == "" {
		return
	}
	h.deletions.set(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, o.GetUID())
}

func spaceRequestToTarget(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[appstudiov1alpha1.ClaimLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
}
