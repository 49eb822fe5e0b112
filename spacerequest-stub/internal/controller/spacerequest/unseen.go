package spacerequest

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// unseenCreateTTL bounds how long a create of the stub's is trusted while
// Managed has not shown it. A cache is behind by moments; an object Managed
// never shows (deleted before its watch saw it, across a relist) is looked
// up on the API server again after this.
const unseenCreateTTL = 30 * time.Second

// unseenCreates remembers the namespaces and kubeconfig Secrets the stub
// created that Managed has not shown yet. The reconcile that the stub's own
// status write wakes often runs before Managed's watch has delivered the
// Secret (or namespace) created just before that write: Managed's "not
// found" then means "not cached yet", and without this record the stub would
// read the Secret (or create the namespace again, AlreadyExists, and read
// it) from the API server. The record of an object goes as soon as Managed's
// watch delivers any event of it (the same UID): from then on Managed's
// answer is the truth again, and a deletion is noticed as before. The event
// that ends the record also brings the next reconcile (seeingHandler), so a
// reconcile that trusted the record is never the last word.
type unseenCreates struct {
	m sync.Map // string key → *unseenCreate (a pointer: CompareAndDelete compares values)
}

type unseenCreate struct {
	at time.Time
	// meta is the metadata the stub wrote (UID, labels, annotations).
	meta metav1.ObjectMeta
}

// created records obj, just created by the stub at now, under key.
func (u *unseenCreates) created(key string, obj client.Object, now time.Time) {
	if obj.GetUID() == "" {
		return
	}
	u.m.Store(key, &unseenCreate{at: now, meta: metav1.ObjectMeta{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(),
	}})
}

// pending returns what the stub created under key if Managed has not shown
// it yet and the record is younger than unseenCreateTTL, and how long it
// stays trusted.
func (u *unseenCreates) pending(key string, now time.Time) (*metav1.ObjectMeta, time.Duration, bool) {
	v, ok := u.m.Load(key)
	if !ok {
		return nil, 0, false
	}
	c := v.(*unseenCreate)
	left := unseenCreateTTL - now.Sub(c.at)
	if left <= 0 {
		u.m.CompareAndDelete(key, v)
		return nil, 0, false
	}
	return c.meta.DeepCopy(), left, true
}

// seen ends the record of key when obj is the object the stub created.
func (u *unseenCreates) seen(key string, obj client.Object) {
	if v, ok := u.m.Load(key); ok && v.(*unseenCreate).meta.UID == obj.GetUID() {
		u.m.CompareAndDelete(key, v)
	}
}

// forget drops the record of key.
func (u *unseenCreates) forget(key string) { u.m.Delete(key) }

// seeingHandler calls seen with every object an event carries before next
// enqueues its reconcile: a reconcile woken by the event finds the record
// ended. gone, if set, is also called with the object of a deletion.
type seeingHandler struct {
	next handler.EventHandler
	seen func(client.Object)
	gone func(client.Object)
}

func (h seeingHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.Object)
	h.next.Create(ctx, e, q)
}

func (h seeingHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.ObjectNew)
	h.next.Update(ctx, e, q)
}

func (h seeingHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.Object)
	if h.gone != nil {
		h.gone(e.Object)
	}
	h.next.Delete(ctx, e, q)
}

func (h seeingHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.Object)
	h.next.Generic(ctx, e, q)
}

// namespaceKey names a namespace in unseenCreates.
func namespaceKey(name string) string { return "namespace/" + name }

// seenNamespace and seenSecret end the record of a namespace or Secret that
// Managed's watch delivered.
func (r *Reconciler) seenNamespace(o client.Object) {
	r.unseen.seen(namespaceKey(o.GetName()), o)
	r.deletedNamespaces.seen(o, false)
}

// goneNamespace ends the record of a namespace the stub deleted whose
// deletion Managed's watch delivered.
func (r *Reconciler) goneNamespace(o client.Object) { r.deletedNamespaces.seen(o, true) }

func (r *Reconciler) seenSecret(o client.Object) {
	r.unseen.seen(secretKey(o.GetNamespace(), o.GetName()), o)
}

// ownDeletions remembers the namespaces the stub deleted itself (terminating
// a SpaceRequest), by UID, until Managed shows them terminating or gone. The
// stub removes a SpaceRequest's finalizer once the API server says its
// namespace is gone; the reconcile that the SpaceRequest's disappearance
// wakes may run before Managed's watch has delivered even the namespace's
// deletion. Without this record, deleteOrphanedNamespace would take the
// cached copy for a namespace left behind by a SpaceRequest whose finalizer
// was removed by hand: a list to confirm, a second delete and a false
// OrphanedNamespaceDeleted Warning.
type ownDeletions struct {
	m sync.Map // namespace name → types.UID
}

// deleted records that the stub deleted the namespace name of UID uid.
func (d *ownDeletions) deleted(name string, uid types.UID) { d.m.Store(name, uid) }

// has reports whether the stub deleted the namespace name of UID uid.
func (d *ownDeletions) has(name string, uid types.UID) bool {
	v, ok := d.m.Load(name)
	return ok && v.(types.UID) == uid
}

// seen ends the record of the namespace obj once Managed shows it
// terminating (or delivers its deletion, see seeingHandler.gone): from then
// on Managed's copy says so itself.
func (d *ownDeletions) seen(obj client.Object, gone bool) {
	if gone || obj.GetDeletionTimestamp() != nil {
		d.m.CompareAndDelete(obj.GetName(), obj.GetUID())
	}
}
