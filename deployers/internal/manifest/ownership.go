package manifest

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// ManagedByAnnotation marks every object the manifest deployer applies with
// the deploy item that manages it: "<namespace>/<name>" of the item (an
// annotation, as an item's name may exceed a label value's 63 characters).
// Policy fallback uses it as Landscaper does: the object is applied and
// deleted only while it is absent or carries this item's mark, so another
// item's object (or one somebody created by hand, which has no mark) is left
// alone, even though every item's objects share the deployer's field manager.
// Policy manage takes an object over, also from another item (Landscaper:
// "occupies already managed resources"): the mark moves to the new item.
// Objects applied before marks existed are adopted (see adoptable).
const ManagedByAnnotation = "manifest.deployer.terrace.dev/managed-by"

// itemMark is the ManagedByAnnotation value of di.
func itemMark(di *lsv1alpha1.DeployItem) string { return di.Namespace + "/" + di.Name }

// markedBy reports whether obj carries di's ManagedByAnnotation.
func markedBy(obj *unstructured.Unstructured, di *lsv1alpha1.DeployItem) bool {
	return obj.GetAnnotations()[ManagedByAnnotation] == itemMark(di)
}

// mark sets di's ManagedByAnnotation on obj.
func mark(obj *unstructured.Unstructured, di *lsv1alpha1.DeployItem) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[ManagedByAnnotation] = itemMark(di)
	obj.SetAnnotations(a)
}

// adoptable reports whether obj, which carries no mark, is one the item
// applied without one (a deployer release that did not mark objects): the
// deployer's field manager owns fields of it and the item's record
// (recorded) lists it. Such an object is the item's: apply marks it,
// deleteResources deletes it. One somebody created by hand has no fields of
// the deployer's, and another item's object carries that item's mark.
func (d *deployer) adoptable(obj *unstructured.Unstructured, recorded bool) bool {
	if !recorded || obj.GetAnnotations()[ManagedByAnnotation] != "" {
		return false
	}
	return slices.ContainsFunc(obj.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool { return mf.Manager == d.fieldOwner })
}

// deletable reports whether the deployer deletes a managed resource when it
// leaves the configuration or the item is deleted.
func deletable(p manifestv1alpha2.ManifestPolicy) bool {
	return p == manifestv1alpha2.ManagePolicy || p == manifestv1alpha2.FallbackPolicy || p == ""
}

// updateOwned reports whether the item's record r says the deployer last
// wrote the object with an update rather than an apply, for field ownership:
// created it with Create (policies immutable and fallback) or merge-patched it
// (updateStrategy patch). A merge patch removes no field it does not name,
// whoever owns it, so only an apply needs them handed over first. No record
// of the object (the zero r), or one without updateStrategy (also every
// record written before it was recorded), means an apply: the default.
func updateOwned(r manifestv1alpha2.ManagedResourceStatus) bool {
	return r.Policy == manifestv1alpha2.ImmutablePolicy || r.Policy == manifestv1alpha2.FallbackPolicy ||
		r.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch
}

// maxConditionalTries bounds how often the deployer reads an object again
// because another writer changed it between the read and a write conditional
// on it; beyond that the reconcile fails with a retryable error.
const maxConditionalTries = 5

// changedOnEveryTry is the retryable error of a write conditional on a read
// that another writer beat maxConditionalTries times in a row.
func changedOnEveryTry(reason, field string, r manifestv1alpha2.TypedObjectReference) error {
	return lib.TransientError(reason, fmt.Errorf("%s: %s changed by others on every try (%d); retrying", field, refString(r), maxConditionalTries))
}

// applyFallback applies obj (marked as di's) with policy fallback: it is
// created while absent and changed while it is di's; otherwise it is left
// alone and mine is false (it is not recorded: it is not di's to delete,
// and an item recording only such objects can be deleted without its Target).
// Another writer may act between the read and the write — another item's
// fallback creating the same object, a manage item taking it over — so the
// write is conditional on what was read: Create for an absent object (not an
// apply, which would take over an object created meanwhile), and the read
// UID and resourceVersion for an existing one. When the condition fails, the
// object is read again and the decision made anew. One read and one write
// per object, as an unconditional apply after the read cost; an object it
// created costs one more write once, in its first later apply (see below).
// recorded tells whether di's record lists the object (for adoptable).
func (d *deployer) applyFallback(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, field string, obj *unstructured.Unstructured,
	strategy manifestv1alpha2.UpdateStrategy, recorded bool,
) (cur *unstructured.Unstructured, mine bool, err error) {
	logger := log.FromContext(ctx).WithValues("object", refString(ref(obj)))
	for range maxConditionalTries {
		existing, created, err := d.readOrCreate(ctx, c, field, obj)
		if err != nil {
			return nil, false, err
		}
		if existing == nil {
			continue // created meanwhile: whose is it?
		}
		if created {
			return existing, true, nil
		}
		if !markedBy(existing, di) {
			if !d.adoptable(existing, recorded) {
				// Another item, or somebody else, manages it: leave it alone
				// (deleteResources does not delete it either).
				logger.V(1).Info("fallback: object managed by someone else; leaving it alone", "managedBy", existing.GetAnnotations()[ManagedByAnnotation])
				return existing, false, nil
			}
			logger.Info("fallback: adopting an object this item applied before objects were marked")
		}
		cur, retry, err := d.writeFallback(ctx, c, field, obj, existing, strategy)
		if err != nil {
			return nil, false, err
		}
		if !retry {
			return cur, true, nil
		}
	}
	return nil, false, changedOnEveryTry(ReasonApplyFailed, field, ref(obj))
}

// writeFallback writes obj over existing, the item's object as read,
// conditional on its UID and resourceVersion: a merge patch with
// updateStrategy patch, else a forced apply after the fields of the
// deployer's Create are handed over. retry reports that the object changed
// (or went) since it was read: the caller reads it again.
func (d *deployer) writeFallback(ctx context.Context, c *clusterClient, field string, obj, existing *unstructured.Unstructured,
	strategy manifestv1alpha2.UpdateStrategy,
) (cur *unstructured.Unstructured, retry bool, err error) {
	write := obj.DeepCopy()
	write.SetUID(existing.GetUID())
	write.SetResourceVersion(existing.GetResourceVersion())
	write.SetManagedFields(nil)
	if strategy == manifestv1alpha2.UpdateStrategyPatch {
		data, err := write.MarshalJSON()
		if err != nil {
			return nil, false, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %v", field, err)
		}
		err = c.Patch(ctx, existing, client.RawPatch(types.MergePatchType, data), client.FieldOwner(d.fieldOwner))
		switch {
		case err == nil:
			return existing, false, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			return nil, true, nil
		}
		return nil, false, classify(field, obj, "patching", err)
	}
	// An object this deployer created keeps fields later dropped from
	// the manifest unless they are handed to its apply (once).
	changed, err := d.handOver(ctx, c, field, existing)
	if err != nil || changed {
		return nil, changed, err
	}
	write.SetResourceVersion(existing.GetResourceVersion())
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(write), client.FieldOwner(d.fieldOwner), client.ForceOwnership)
	switch {
	case err == nil:
		return write, false, nil
	case apierrors.IsConflict(err):
		return nil, true, nil // changed, deleted or replaced meanwhile
	}
	return nil, false, classify(field, obj, "applying", err)
}

// handOver hands the fields the deployer's field manager owns in cur as an
// Update manager — what its Create (policies fallback and immutable) or a
// merge patch set — to its Apply manager, so that a later forced apply
// removes those the manifest does not list any more, as for every applied object.
// Nothing to hand over costs nothing; otherwise one write, conditional on
// cur's resourceVersion (csaupgrade's patch carries it): changed reports that
// cur was changed or deleted since it was read, and the caller reads it
// again. On success cur is the object as written (its new resourceVersion).
func (d *deployer) handOver(ctx context.Context, c *clusterClient, field string, cur *unstructured.Unstructured) (changed bool, err error) {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(cur, sets.New(d.fieldOwner), d.fieldOwner)
	if err != nil {
		return false, classify(field, cur, "reading the field ownership of", err)
	}
	if patch == nil {
		return false, nil
	}
	err = c.Patch(ctx, cur, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, classify(field, cur, "patching the field ownership of", err)
	}
	return false, nil
}

// handOverCreated reads the object obj names and hands its fields over (see
// handOver) before a forced apply with policy manage or keep, when the item's
// record says the deployer last wrote it with an update (updateOwned: a
// policy that creates with Create, or updateStrategy patch). Only on such a
// change of policy or strategy: one read, and one write if there is anything
// to hand over. An absent object needs nothing (the apply creates it).
func (d *deployer) handOverCreated(ctx context.Context, c *clusterClient, field string, obj *unstructured.Unstructured) error {
	for range maxConditionalTries {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return classify(field, obj, "reading", err)
		}
		changed, err := d.handOver(ctx, c, field, cur)
		if err != nil || !changed {
			return err
		}
		// Changed meanwhile: read it again.
	}
	return changedOnEveryTry(ReasonApplyFailed, field, ref(obj))
}

// applyImmutable creates obj (marked) while it is absent and never changes an
// existing one, whoever created it: policy immutable, created once, never
// changed. cur is the object as the target holds it. Another writer may create
// the object between the read and the write, so the write is a Create (an
// apply would take over and overwrite that object); when it already exists,
// the object is read again and left as it is. One read and one write for an
// absent object, one read for an existing one.
func (d *deployer) applyImmutable(ctx context.Context, c *clusterClient, field string, obj *unstructured.Unstructured) (cur *unstructured.Unstructured, err error) {
	for range maxConditionalTries {
		cur, _, err := d.readOrCreate(ctx, c, field, obj)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			return cur, nil
		}
		log.FromContext(ctx).V(1).Info("immutable: object created by someone else meanwhile; leaving it as it is", "object", refString(ref(obj)))
		// Read it: it exists now (unless deleted again meanwhile).
	}
	return nil, lib.TransientError(ReasonApplyFailed, fmt.Errorf("%s: %s created and deleted by others on every try (%d); retrying", field, refString(ref(obj)), maxConditionalTries))
}

// readOrCreate reads the object obj names and returns it; when it is absent,
// it creates obj instead (Create, not an apply, which would take over an
// object created meanwhile) and returns it with created true. cur is nil,
// with no error, when somebody created the object between the read and the
// create: the caller reads again and decides by what it finds. One read, and
// one write for an absent object.
func (d *deployer) readOrCreate(ctx context.Context, c *clusterClient, field string, obj *unstructured.Unstructured) (cur *unstructured.Unstructured, created bool, err error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	err = c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if err == nil {
		return existing, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, classify(field, obj, "reading", err)
	}
	fresh := obj.DeepCopy()
	fresh.SetResourceVersion("")
	fresh.SetManagedFields(nil)
	err = c.Create(ctx, fresh, client.FieldOwner(d.fieldOwner))
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, false, nil
	case err != nil:
		return nil, false, classify(field, obj, "creating", err)
	}
	return fresh, true, nil
}
