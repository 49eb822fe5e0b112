package manifest

import (
	"context"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// deleteResources deletes resources group by group: the configured
// deletion groups (see stepsOf), else namespaced objects, then
// cluster-scoped ones, then namespaces, then CRDs. While an object of a group
// is held by finalizers (deleted now or before), the next group waits. done
// reports that every group was deleted (what is still being deleted then
// finishes on its own, e.g. a namespace's content). left are the resources
// that are not gone yet — held by finalizers, not reached or failed — so
// that the caller can keep them recorded: forgetting them would leave them
// behind for good. Resources no configured group selects are not deleted
// and not in left. An object being deleted without finalizers of its own (a
// namespace: its content is the namespace controller's) counts as gone.
func (d *deployer) deleteResources(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, resources []manifestv1alpha2.ManagedResourceStatus,
	groups []manifestv1alpha2.DeletionGroupDefinition,
) (left []manifestv1alpha2.ManagedResourceStatus, done bool, err error) {
	items, err := deletionOrder(c, resources)
	if err != nil {
		// Nothing was deleted: all of them are left.
		return slices.DeleteFunc(slices.Clone(resources), func(r manifestv1alpha2.ManagedResourceStatus) bool { return !deletable(r.Policy) }), false, err
	}
	steps := stepsOf(c, groups)
	batches := batchesOf(steps, items)
	rest := func(from ...[]deletion) []manifestv1alpha2.ManagedResourceStatus {
		for _, b := range from {
			for _, it := range b {
				left = append(left, it.res)
			}
		}
		return left
	}
	for s, st := range steps {
		batch := batches[s]
		if st.custom != nil && st.custom.DeleteAllResources {
			every, err := everyObjectOf(ctx, c, st.custom)
			if err != nil {
				return rest(batches[s:]...), false, err
			}
			batch = withoutDuplicates(append(batch, every...))
		}
		waiting := false
		for i, it := range batch {
			held, err := d.deleteObject(ctx, c, di, it, st.force)
			if err != nil {
				return rest(append([][]deletion{batch[i:]}, batches[s+1:]...)...), false, err
			}
			if held {
				waiting = true
				left = append(left, it.res)
			}
		}
		if waiting && moreToDelete(steps[s+1:], batches[s+1:]) {
			// Let this group go before the next one (e.g. the namespace).
			return rest(batches[s+1:]...), false, nil
		}
	}
	return left, true, nil
}

// batchesOf puts each item into the first step that selects it.
func batchesOf(steps []deletionStep, items []deletion) [][]deletion {
	batches := make([][]deletion, len(steps))
	for _, it := range items {
		for s, st := range steps {
			if st.selects(it) {
				batches[s] = append(batches[s], it)
				break
			}
		}
	}
	return batches
}

// moreToDelete reports whether later steps have anything to do.
func moreToDelete(steps []deletionStep, batches [][]deletion) bool {
	for s, st := range steps {
		if len(batches[s]) > 0 || (st.custom != nil && st.custom.DeleteAllResources) {
			return true
		}
	}
	return false
}

// withoutDuplicates keeps the first deletion of each object.
func withoutDuplicates(items []deletion) []deletion {
	seen := map[string]bool{}
	return slices.DeleteFunc(items, func(it deletion) bool {
		k := resourceKey(it.res.Resource)
		dup := seen[k]
		seen[k] = true
		return dup
	})
}

// deletion is a recorded resource to delete, with the object it names and
// its rank (see rank). any marks an object a deletion group with
// deleteAllResources selected on the target: it is deleted whoever made it.
type deletion struct {
	res  manifestv1alpha2.ManagedResourceStatus
	obj  *unstructured.Unstructured
	rank int
	any  bool
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

// deleteObject deletes the object of it if it is di's (or it.any), and
// reports whether it is still held by finalizers (deleted now or before);
// force removes those finalizers. An object being deleted without
// finalizers of its own counts as gone. The deletion is conditional on the
// UID and resourceVersion read: an item taking the object over in between
// (policy manage) makes it fail, and the object is read and judged again.
func (d *deployer) deleteObject(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, it deletion, force bool) (held bool, err error) {
	const field = "status.providerStatus.managedResources"
	res, obj := it.res, it.obj
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
			return d.stillHeld(ctx, c, cur, force)
		}
		if by := cur.GetAnnotations()[ManagedByAnnotation]; !it.any && ((by != "" && by != itemMark(di)) ||
			(res.Policy == manifestv1alpha2.FallbackPolicy && by == "" && !d.adoptable(cur, true))) {
			// Not this item's (any more): another item took it over
			// (policy manage), or, for fallback, somebody else manages
			// it. An unmarked object under manage is this item's (as
			// applied before objects were marked), and so is one under
			// fallback that the deployer's field manager applied.
			log.FromContext(ctx).Info("not deleting an object another item or somebody else manages",
				"object", refString(res.Resource), "managedBy", by, "policy", res.Policy)
			return false, nil
		}
		if conflict, err := d.patchBeforeDelete(ctx, c, res, cur); err != nil {
			return false, err
		} else if conflict {
			continue // changed meanwhile: whose is it now?
		}
		uid, rv := cur.GetUID(), cur.GetResourceVersion()
		err := c.Delete(ctx, cur, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			return d.stillHeld(ctx, c, cur, force)
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsConflict(err):
			continue // changed meanwhile: whose is it now?
		}
		return false, classify(field, obj, "deleting", err)
	}
	return false, changedOnEveryTry(ReasonDeleteFailed, field, res.Resource)
}

// stillHeld reports whether cur, being deleted, is held by finalizers;
// with force it removes them all (deletion group forceDelete), whoever
// added them.
func (d *deployer) stillHeld(ctx context.Context, c *clusterClient, cur *unstructured.Unstructured, force bool) (bool, error) {
	if !hasFinalizers(cur) {
		return false, nil
	}
	if !force {
		return true, nil
	}
	err := c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)), client.FieldOwner(d.fieldOwner))
	if err == nil || apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, classify("deletionGroups.forceDelete", cur, "removing the finalizers of", err)
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
