package manifest

import (
	"context"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// deleteResources deletes resources in the safe order (namespaced objects,
// then cluster-scoped ones, then CRDs and namespaces), one group at a time:
// while an object of a group is held by finalizers (deleted now or before),
// the next group waits. done reports that every group was deleted (what is
// still being deleted then finishes on its own, e.g. a namespace's content).
// left are the resources that are not gone yet — held by finalizers, not
// reached or failed — so that the caller can keep them recorded: forgetting
// them would leave them behind for good. An object being deleted without
// finalizers of its own (a namespace: its content is the namespace
// controller's) counts as gone.
func (d *deployer) deleteResources(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, resources []manifestv1alpha2.ManagedResourceStatus) (left []manifestv1alpha2.ManagedResourceStatus, done bool, err error) {
	items, err := deletionOrder(c, resources)
	if err != nil {
		// Nothing was deleted: all of them are left.
		return slices.DeleteFunc(slices.Clone(resources), func(r manifestv1alpha2.ManagedResourceStatus) bool { return !deletable(r.Policy) }), false, err
	}
	rest := func(from []deletion) []manifestv1alpha2.ManagedResourceStatus {
		for _, it := range from {
			left = append(left, it.res)
		}
		return left
	}
	for len(items) > 0 {
		group := items[0].rank
		waiting := false
		for len(items) > 0 && items[0].rank == group {
			it := items[0]
			held, err := d.deleteObject(ctx, c, di, it.res, it.obj)
			if err != nil {
				return rest(items), false, err
			}
			if held {
				waiting = true
				left = append(left, it.res)
			}
			items = items[1:]
		}
		if waiting && len(items) > 0 {
			// Let this group go before the next one (e.g. the namespace).
			return rest(items), false, nil
		}
	}
	return left, true, nil
}

// deletion is a recorded resource to delete, with the object it names and
// its rank (see rank).
type deletion struct {
	res  manifestv1alpha2.ManagedResourceStatus
	obj  *unstructured.Unstructured
	rank int
}

// deletionOrder is the deletable resources in the reverse of the order of
// applying; those of a kind the target does not serve any more are gone.
func deletionOrder(c *clusterClient, resources []manifestv1alpha2.ManagedResourceStatus) ([]deletion, error) {
	var items []deletion
	for _, r := range resources {
		if !deletable(r.Policy) {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(r.Resource.APIVersion)
		obj.SetKind(r.Resource.Kind)
		obj.SetName(r.Resource.Name)
		obj.SetNamespace(r.Resource.Namespace)
		ns, err := namespaced(c, obj)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // the kind is gone, so are its objects
			}
			return nil, classify("status.providerStatus.managedResources", obj, "mapping", err)
		}
		items = append(items, deletion{res: r, obj: obj, rank: rank(obj.GroupVersionKind().GroupKind(), ns)})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].rank > items[j].rank })
	return items, nil
}

// deleteObject deletes the recorded resource res (obj names it) if it is
// di's, and reports whether it is still held by finalizers (deleted now or
// before). An object being deleted without finalizers of its own counts as
// gone. The deletion is conditional on the UID and resourceVersion read: an
// item taking the object over in between (policy manage) makes it fail, and
// the object is read and judged again.
func (d *deployer) deleteObject(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, res manifestv1alpha2.ManagedResourceStatus, obj *unstructured.Unstructured) (held bool, err error) {
	const field = "status.providerStatus.managedResources"
	for range maxConditionalTries {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, classify(field, obj, "reading", err)
		}
		if cur.GetDeletionTimestamp() != nil {
			// Deleted before: while still held, the next group waits for
			// it as it did when the deletion was issued.
			return hasFinalizers(cur), nil
		}
		if by := cur.GetAnnotations()[ManagedByAnnotation]; (by != "" && by != itemMark(di)) ||
			(res.Policy == manifestv1alpha2.FallbackPolicy && by == "" && !d.adoptable(cur, true)) {
			// Not this item's (any more): another item took it over
			// (policy manage), or, for fallback, somebody else manages
			// it. An unmarked object under manage is this item's (as
			// applied before objects were marked), and so is one under
			// fallback that the deployer's field manager applied.
			log.FromContext(ctx).Info("not deleting an object another item or somebody else manages",
				"object", refString(res.Resource), "managedBy", by, "policy", res.Policy)
			return false, nil
		}
		uid, rv := cur.GetUID(), cur.GetResourceVersion()
		err := c.Delete(ctx, cur, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			return hasFinalizers(cur), nil
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsConflict(err):
			continue // changed meanwhile: whose is it now?
		}
		return false, classify(field, obj, "deleting", err)
	}
	return false, changedOnEveryTry(ReasonDeleteFailed, field, res.Resource)
}

func hasFinalizers(obj *unstructured.Unstructured) bool {
	return len(obj.GetFinalizers()) > 0
}

// merged is cur followed by the resources of prev that cur lacks.
func merged(prev, cur []manifestv1alpha2.ManagedResourceStatus) []manifestv1alpha2.ManagedResourceStatus {
	return append(slices.Clone(cur), dropped(prev, cur)...)
}

// dropped returns the previously managed resources that left the configuration.
func dropped(prev, cur []manifestv1alpha2.ManagedResourceStatus) []manifestv1alpha2.ManagedResourceStatus {
	keep := map[string]bool{}
	for _, r := range cur {
		keep[resourceKey(r.Resource)] = true
	}
	var out []manifestv1alpha2.ManagedResourceStatus
	for _, r := range prev {
		if !keep[resourceKey(r.Resource)] {
			out = append(out, r)
		}
	}
	return out
}

// resourceKey identifies the object r names, whatever version of its group
// the configuration used.
func resourceKey(r manifestv1alpha2.TypedObjectReference) string {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}
