package manifest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// apply applies every manifest by its policy and returns the managed
// resources, in configuration order: on an error, those applied before it
// (they must stay recorded, or deleting the item would leave them behind).
// prev is the item's record from before (status.providerStatus). An object of
// a kind that a CustomResourceDefinition of the same item defines, and that
// the target does not serve yet, waits for it: it is applied in a later
// reconcile, and waitingFor says which kinds are missing. The job's deadline
// (zero: none) is checked before each manifest: a slow target cluster, each
// request within its own timeout, must not keep the job past it. (A call
// that starts past the deadline applies, and the step that waits reports
// the timeout: readiness, a pending deletion.)
func (d *deployer) apply(ctx context.Context, c *clusterClient, di *lsv1alpha1.DeployItem, cfg *config, prev []manifestv1alpha2.ManagedResourceStatus, deadline time.Time) (managedOut []manifestv1alpha2.ManagedResourceStatus, applied []*unstructured.Unstructured, waitingFor string, err error) {
	entries, waitingFor, err := applyOrder(c, cfg)
	if err != nil {
		return nil, nil, "", err
	}
	run := &applyRun{
		d: d, c: c, di: di, cfg: cfg,
		recorded: map[string]manifestv1alpha2.ManagedResourceStatus{},
		managed:  make([]manifestv1alpha2.ManagedResourceStatus, len(cfg.objects)),
		applied:  make([]*unstructured.Unstructured, 0, len(entries)),
	}
	for _, r := range prev {
		run.recorded[resourceKey(r.Resource)] = r
	}
	inTime := !pastDeadline(deadline)
	for i, e := range entries {
		if inTime && pastDeadline(deadline) {
			return run.soFar(), nil, "", lib.PermanentError(lib.ReasonTimeout,
				fmt.Sprintf("the job's timeout passed while applying: %d of %d manifests applied, %s and later not", i, len(entries), e.field),
				lsv1alpha1.ErrorTimeout)
		}
		if err := run.applyEntry(ctx, e); err != nil {
			return run.soFar(), nil, "", err
		}
	}
	return run.soFar(), run.applied, waitingFor, nil
}

// applyEntry is a manifest in the order of applying; index is its place in
// the configuration.
type applyEntry struct {
	manifestEntry
	rank  int
	index int
}

// applyOrder is the manifests to apply in the safe order (see rank), those
// of ignore left out, and the kinds still waiting for a CustomResourceDefinition
// of the item to be served.
func applyOrder(c *clusterClient, cfg *config) (entries []applyEntry, waitingFor string, err error) {
	var waiting []string
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
			return nil, "", classify(m.field, m.obj, "mapping", err)
		}
		entries = append(entries, applyEntry{manifestEntry: m, rank: rank(m.obj.GroupVersionKind().GroupKind(), ns), index: i})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].rank < entries[j].rank })
	if len(waiting) > 0 {
		waitingFor = "waiting for the target to serve the kinds this item's CustomResourceDefinitions define: " + strings.Join(waiting, ", ")
	}
	return entries, waitingFor, nil
}

// applyRun is one apply of an item's manifests.
type applyRun struct {
	d   *deployer
	c   *clusterClient
	di  *lsv1alpha1.DeployItem
	cfg *config
	// recorded is how each object was last applied, by the item's record.
	recorded map[string]manifestv1alpha2.ManagedResourceStatus
	// managed holds the record of each object applied so far, at its place
	// in the configuration.
	managed []manifestv1alpha2.ManagedResourceStatus
	// applied are the objects as the target holds them, for readiness.
	applied []*unstructured.Unstructured
}

// applyEntry applies one manifest by its policy and records it.
func (r *applyRun) applyEntry(ctx context.Context, e applyEntry) error {
	obj := e.obj.DeepCopy()
	mark(obj, r.di)
	if err := withCreateAnnotations(ctx, r.c, e.hooks.at, obj, e.hooks.annotateBeforeCreate); err != nil {
		return err
	}
	var (
		cur  *unstructured.Unstructured
		mine = true
		err  error
	)
	switch e.policy {
	case manifestv1alpha2.FallbackPolicy:
		_, wasRecorded := r.recorded[resourceKey(ref(obj))]
		cur, mine, err = r.d.applyFallback(ctx, r.c, r.di, e.field, obj, r.cfg.spec.UpdateStrategy, wasRecorded)
	case manifestv1alpha2.ImmutablePolicy:
		// Recorded whoever created it: immutable objects are never
		// deleted, so the record cannot harm another writer's object.
		cur, err = r.d.applyImmutable(ctx, r.c, e.field, obj)
	default:
		cur, err = r.applyManaged(ctx, e.field, obj)
	}
	if err != nil {
		return err
	}
	if mine && e.hooks.patchAfterDeployment != nil {
		if cur, err = r.d.patchAfterDeployment(ctx, r.c, e.hooks, obj); err != nil {
			// Applied before the patch failed: recorded, so that
			// deleting the item deletes it.
			r.managed[e.index] = r.record(e, obj)
			return err
		}
	}
	r.applied = append(r.applied, cur)
	if mine {
		r.managed[e.index] = r.record(e, obj)
	}
	return nil
}

// applyManaged applies obj with policy manage or keep: a forced server-side
// apply, or a merge patch of an existing object with updateStrategy patch.
func (r *applyRun) applyManaged(ctx context.Context, field string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if r.cfg.spec.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch {
		// Only patch needs the current object; a plain server-side apply
		// does not, which saves a round trip per object.
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		getErr := r.c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if getErr != nil && !apierrors.IsNotFound(getErr) {
			return nil, classify(field, obj, "reading", getErr)
		}
		if getErr == nil {
			data, err := obj.MarshalJSON()
			if err != nil {
				return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %v", field, err)
			}
			if err := r.c.Patch(ctx, existing, client.RawPatch(types.MergePatchType, data), client.FieldOwner(r.d.fieldOwner)); err != nil {
				return nil, classify(field, obj, "patching", err)
			}
			return existing, nil
		}
	} else if updateOwned(r.recorded[resourceKey(ref(obj))]) {
		// Last written by a create or a merge patch (updates, not applies,
		// for field ownership): the forced apply alone would never remove
		// the fields those set that the manifest has dropped since. Hand
		// them to the apply once, on the change; the next record says
		// manage or keep and no patch, so later jobs do not read.
		if err := r.d.handOverCreated(ctx, r.c, field, obj); err != nil {
			return nil, err
		}
	}
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	if err := r.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(r.d.fieldOwner), client.ForceOwnership); err != nil {
		return nil, classify(field, obj, "applying", err)
	}
	return obj, nil
}

// record is the record of an object applied now (see ManagedResourceStatus).
func (r *applyRun) record(e applyEntry, obj *unstructured.Unstructured) manifestv1alpha2.ManagedResourceStatus {
	policy := e.policy
	rec := manifestv1alpha2.ManagedResourceStatus{Policy: policy, Resource: ref(obj),
		AnnotateBeforeDelete: e.hooks.annotateBeforeDelete, PatchBeforeDelete: e.hooks.patchBeforeDelete}
	if r.cfg.spec.UpdateStrategy == manifestv1alpha2.UpdateStrategyPatch && policy != manifestv1alpha2.ImmutablePolicy {
		rec.UpdateStrategy = manifestv1alpha2.UpdateStrategyPatch
	}
	return rec
}

// soFar is what was applied so far, in configuration order.
func (r *applyRun) soFar() []manifestv1alpha2.ManagedResourceStatus {
	out := make([]manifestv1alpha2.ManagedResourceStatus, 0, len(r.managed))
	for _, m := range r.managed {
		if m.Resource.Name != "" {
			out = append(out, m)
		}
	}
	return out
}

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

func ref(obj *unstructured.Unstructured) manifestv1alpha2.TypedObjectReference {
	return manifestv1alpha2.TypedObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace()}
}

func refString(r manifestv1alpha2.TypedObjectReference) string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.APIVersion)
	}
	return fmt.Sprintf("%s %s/%s (%s)", r.Kind, r.Namespace, r.Name, r.APIVersion)
}
