package manifest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// Reasons of the manifest deployer's errors.
const (
	ReasonApplyFailed      = "ApplyFailed"
	ReasonRejected         = "ManifestRejected"
	ReasonUnknownKind      = "UnknownKind"
	ReasonUnreachable      = "TargetUnreachable"
	ReasonDeleteFailed     = "DeleteFailed"
	ReasonNotReady         = "ReadinessTimeout"
	ReasonExportFailed     = "ExportFailed"
	ReasonReadinessInvalid = "InvalidReadinessCheck"
)

// rank orders objects for applying: CRDs and namespaces first, then other
// cluster-scoped objects, then namespaced ones. Deletion uses the reverse.
func rank(gk schema.GroupKind, namespaced bool) int {
	switch {
	case gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	case gk == schema.GroupKind{Kind: "Namespace"}:
		return 1
	case !namespaced:
		return 2
	}
	return 3
}

func ref(obj *unstructured.Unstructured) manifestv1alpha2.TypedObjectReference {
	return manifestv1alpha2.TypedObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace()}
}

func refString(r manifestv1alpha2.TypedObjectReference) string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.APIVersion)
	}
	return fmt.Sprintf("%s %s/%s (%s)", r.Kind, r.Namespace, r.Name, r.APIVersion)
}

// classify turns an API error into a lastError: refusals that retrying
// cannot fix are configuration problems, the rest is retried.
func classify(field string, obj *unstructured.Unstructured, op string, err error) error {
	what := fmt.Sprintf("%s: %s %s", field, op, refString(ref(obj)))
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case meta.IsNoMatchError(err):
		return lib.ConfigError(ReasonUnknownKind, "%s: the target cluster does not serve this kind: %v", what, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsRequestEntityTooLargeError(err):
		return lib.ConfigError(ReasonRejected, "%s: rejected by the target API server: %v", what, err)
	case apierrors.IsForbidden(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: forbidden: %v", what, err), lsv1alpha1.ErrorInsufficientPermission)
	case apierrors.IsUnauthorized(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: unauthorized: %v", what, err), lsv1alpha1.ErrorUnauthorized)
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		return lib.TransientError(ReasonUnreachable, fmt.Errorf("%s: target cluster unreachable: %w", what, err))
	}
	return lib.TransientError(ReasonApplyFailed, fmt.Errorf("%s: %w", what, err))
}

// namespaced resolves the scope of obj's kind and defaults the namespace of
// namespaced objects to "default".
func namespaced(c *clusterClient, obj *unstructured.Unstructured) (bool, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace("default")
		}
		return true, nil
	}
	obj.SetNamespace("")
	return false, nil
}

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

// apply applies every manifest by its policy and returns the managed
// resources, in configuration order: on an error, those applied before it
// (they must stay recorded, or deleting the item would leave them behind).
// prev is the item's record from before (status.providerStatus). An object of
// a kind that a CustomResourceDefinition of the same item defines, and that
// the target does not serve yet, waits for it: it is applied in a later
// reconcile, and waitingFor says which kinds are missing.
func (d *deployer) apply(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, cfg *config, prev []manifestv1alpha2.ManagedResourceStatus) (managedOut []manifestv1alpha2.ManagedResourceStatus, applied []*unstructured.Unstructured, waitingFor string, err error) {
	type entry struct {
		manifestEntry
		rank  int
		index int
	}
	var (
		entries []entry
		waiting []string
	)
	defined := kindsDefined(cfg)
	for i, m := range cfg.objects {
		if m.policy == manifestv1alpha2.IgnorePolicy {
			continue
		}
		ns, err := namespaced(c, m.obj)
		if err != nil {
			if gk := m.obj.GroupVersionKind().GroupKind(); meta.IsNoMatchError(err) && defined[gk] {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", gk.Kind, m.field))
				continue
			}
			return nil, nil, "", classify(m.field, m.obj, "mapping", err)
		}
		entries = append(entries, entry{manifestEntry: m, rank: rank(m.obj.GroupVersionKind().GroupKind(), ns), index: i})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].rank < entries[j].rank })
	if len(waiting) > 0 {
		waitingFor = "waiting for the target to serve the kinds this item's CustomResourceDefinitions define: " + strings.Join(waiting, ", ")
	}
	// How each object was last applied, by the item's record.
	recorded := map[string]manifestv1alpha2.ManagedResourceStatus{}
	for _, r := range prev {
		recorded[resourceKey(r.Resource)] = r
	}
	// The record of an object applied now (see ManagedResourceStatus).
	record := func(policy manifestv1alpha2.ManifestPolicy, obj *unstructured.Unstructured) manifestv1alpha2.ManagedResourceStatus {
		r := manifestv1alpha2.ManagedResourceStatus{Policy: policy, Resource: ref(obj)}
		if cfg.spec.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch && policy != manifestv1alpha2.ImmutablePolicy {
			r.UpdateStrategy = manifestv1alpha2.UpdateStrategyPatch
		}
		return r
	}

	managed := make([]manifestv1alpha2.ManagedResourceStatus, len(cfg.objects))
	applied = make([]*unstructured.Unstructured, 0, len(entries))
	// What was applied so far, in configuration order.
	soFar := func() []manifestv1alpha2.ManagedResourceStatus {
		out := make([]manifestv1alpha2.ManagedResourceStatus, 0, len(managed))
		for _, m := range managed {
			if m.Resource.Name != "" {
				out = append(out, m)
			}
		}
		return out
	}
	for _, e := range entries {
		obj := e.obj.DeepCopy()
		mark(obj, di)
		if e.policy == manifestv1alpha2.FallbackPolicy {
			_, wasRecorded := recorded[resourceKey(ref(obj))]
			cur, mine, err := d.applyFallback(ctx, c, di, e.field, obj, cfg.spec.UpdateStrategy, wasRecorded)
			if err != nil {
				return soFar(), nil, "", err
			}
			applied = append(applied, cur)
			if mine {
				managed[e.index] = record(e.policy, obj)
			}
			continue
		}
		if e.policy == manifestv1alpha2.ImmutablePolicy {
			cur, err := d.applyImmutable(ctx, c, e.field, obj)
			if err != nil {
				return soFar(), nil, "", err
			}
			applied = append(applied, cur)
			// Recorded whoever created it: immutable objects are never
			// deleted, so the record cannot harm another writer's object.
			managed[e.index] = record(e.policy, obj)
			continue
		}
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		exists := false
		// Only patch needs the current object; a plain server-side apply
		// does not, which saves a round trip per object.
		if cfg.spec.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch {
			getErr := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
			if getErr != nil && !apierrors.IsNotFound(getErr) {
				return soFar(), nil, "", classify(e.field, obj, "reading", getErr)
			}
			exists = getErr == nil
		}
		switch {
		case cfg.spec.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch && exists:
			data, err := obj.MarshalJSON()
			if err != nil {
				return soFar(), nil, "", lib.ConfigError(lib.ReasonInvalidConfig, "%s: %v", e.field, err)
			}
			if err := c.Patch(ctx, existing, client.RawPatch(types.MergePatchType, data), client.FieldOwner(d.fieldOwner)); err != nil {
				return soFar(), nil, "", classify(e.field, obj, "patching", err)
			}
			applied = append(applied, existing)
		default:
			// Last written by a create or a merge patch (updates, not applies,
			// for field ownership): the forced apply alone would never remove
			// the fields those set that the manifest has dropped since. Hand
			// them to the apply once, on the change; the next record says
			// manage or keep and no patch, so later jobs do not read.
			if cfg.spec.UpdateStrategy != manifestv1alpha2.UpdateStrategyPatch && updateOwned(recorded[resourceKey(ref(obj))]) {
				if err := d.handOverCreated(ctx, c, e.field, obj); err != nil {
					return soFar(), nil, "", err
				}
			}
			obj.SetResourceVersion("")
			obj.SetManagedFields(nil)
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(d.fieldOwner), client.ForceOwnership); err != nil {
				return soFar(), nil, "", classify(e.field, obj, "applying", err)
			}
			applied = append(applied, obj)
		}
		managed[e.index] = record(e.policy, obj)
	}
	return soFar(), applied, waitingFor, nil
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
			if err == nil {
				return existing, true, nil
			}
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, false, classify(field, obj, "patching", err)
		}
		// An object this deployer created keeps fields later dropped from
		// the manifest unless they are handed to its apply (once).
		changed, err := d.handOver(ctx, c, field, existing)
		if err != nil {
			return nil, false, err
		}
		if changed {
			continue
		}
		write.SetResourceVersion(existing.GetResourceVersion())
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(write), client.FieldOwner(d.fieldOwner), client.ForceOwnership)
		if err == nil {
			return write, true, nil
		}
		if apierrors.IsConflict(err) {
			continue // changed, deleted or replaced meanwhile
		}
		return nil, false, classify(field, obj, "applying", err)
	}
	return nil, false, changedOnEveryTry(ReasonApplyFailed, field, ref(obj))
}

// handOver hands the fields the deployer's field manager owns in cur as an
// Update manager — what its Create (policies fallback and immutable) or a
// merge patch set — to its Apply manager, so that a later forced apply
// removes those the manifest no longer lists, as for every applied object.
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

// adoptable reports whether obj, which carries no mark, is one the item
// applied with an earlier version of the deployer that did not mark objects
// (an upgrade): the deployer's field manager owns fields of it and the item's
// record (recorded) lists it. Such an object is the item's: apply marks it,
// deleteResources deletes it. One somebody created by hand has no fields of
// the deployer's, and another item's object carries that item's mark.
func (d *deployer) adoptable(obj *unstructured.Unstructured, recorded bool) bool {
	if !recorded || obj.GetAnnotations()[ManagedByAnnotation] != "" {
		return false
	}
	return slices.ContainsFunc(obj.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool { return mf.Manager == d.fieldOwner })
}

// kindsDefined are the kinds the CustomResourceDefinitions among cfg's
// manifests define.
func kindsDefined(cfg *config) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, m := range cfg.objects {
		if m.obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(m.obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(m.obj.Object, "spec", "names", "kind")
		if group != "" && kind != "" {
			out[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	return out
}

// deletable reports whether the deployer deletes a managed resource when it
// leaves the configuration or the item is deleted.
func deletable(p manifestv1alpha2.ManifestPolicy) bool {
	return p == manifestv1alpha2.ManagePolicy || p == manifestv1alpha2.FallbackPolicy || p == ""
}

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
	type item struct {
		res  manifestv1alpha2.ManagedResourceStatus
		obj  *unstructured.Unstructured
		rank int
	}
	var items []item
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
			// Nothing was deleted: all of them are left.
			return slices.DeleteFunc(slices.Clone(resources), func(r manifestv1alpha2.ManagedResourceStatus) bool { return !deletable(r.Policy) }),
				false, classify("status.providerStatus.managedResources", obj, "mapping", err)
		}
		items = append(items, item{res: r, obj: obj, rank: rank(obj.GroupVersionKind().GroupKind(), ns)})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].rank > items[j].rank })
	rest := func(from []item) []manifestv1alpha2.ManagedResourceStatus {
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
