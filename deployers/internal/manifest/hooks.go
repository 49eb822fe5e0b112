package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// objectHooks are a manifest's annotations and merge patches around its
// creation, deployment and deletion.
type objectHooks struct {
	// at names the manifest in messages (spec.config.manifests[i]).
	at                   string
	annotateBeforeCreate map[string]string
	annotateBeforeDelete map[string]string
	patchAfterDeployment map[string]any
	patchBeforeDelete    *runtime.RawExtension
}

// parseHooks checks the hooks of the manifest at field: annotation keys
// and values as the API server would, patches must be JSON objects.
func parseHooks(at string, m manifestv1alpha2.Manifest) (objectHooks, error) {
	h := objectHooks{at: at, annotateBeforeCreate: m.AnnotateBeforeCreate, annotateBeforeDelete: m.AnnotateBeforeDelete, patchBeforeDelete: m.PatchBeforeDelete}
	for name, a := range map[string]map[string]string{"annotateBeforeCreate": m.AnnotateBeforeCreate, "annotateBeforeDelete": m.AnnotateBeforeDelete} {
		if errs := apivalidation.ValidateAnnotations(a, field.NewPath(at+"."+name)); len(errs) > 0 {
			return objectHooks{}, lib.ConfigError(lib.ReasonInvalidConfig, "%s", errs.ToAggregate().Error())
		}
	}
	var err error
	if h.patchAfterDeployment, err = mergePatch(at+".patchAfterDeployment", m.PatchAfterDeployment); err != nil {
		return objectHooks{}, err
	}
	if _, err = mergePatch(at+".patchBeforeDelete", m.PatchBeforeDelete); err != nil {
		return objectHooks{}, err
	}
	return h, nil
}

// mergePatch decodes a merge patch, which must be a JSON object (nil when unset).
func mergePatch(field string, raw *runtime.RawExtension) (map[string]any, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	var patch map[string]any
	if err := json.Unmarshal(raw.Raw, &patch); err != nil || patch == nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: a merge patch must be a JSON object, not %s", field, shortJSON(raw.Raw))
	}
	return patch, nil
}

func shortJSON(raw []byte) string {
	const limit = 80
	raw = bytes.TrimSpace(raw)
	if len(raw) > limit {
		return string(raw[:limit]) + "..."
	}
	return string(raw)
}

// withCreateAnnotations adds annotateBeforeCreate to obj when the target
// does not hold the object yet. Of an existing object it keeps those it
// still carries unchanged: a server-side apply would remove them otherwise.
func withCreateAnnotations(ctx context.Context, c *clusterClient, at string, obj *unstructured.Unstructured, annotations map[string]string) error {
	if len(annotations) == 0 {
		return nil
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return classify(at+".annotateBeforeCreate", obj, "reading", err)
	}
	add := maps.Clone(annotations)
	if err == nil {
		have := cur.GetAnnotations()
		maps.DeleteFunc(add, func(k, v string) bool { old, ok := have[k]; return !ok || old != v })
	}
	if len(add) == 0 {
		return nil
	}
	all := obj.GetAnnotations()
	if all == nil {
		all = map[string]string{}
	}
	for k, v := range add {
		if _, set := all[k]; !set { // the manifest's own value wins
			all[k] = v
		}
	}
	obj.SetAnnotations(all)
	return nil
}

// patchAfterDeployment merge-patches the applied object; it returns the
// object as the target holds it then.
func (d *deployer) patchAfterDeployment(ctx context.Context, c *clusterClient, h objectHooks, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(h.patchAfterDeployment)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.patchAfterDeployment: %v", h.at, err)
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	cur.SetNamespace(obj.GetNamespace())
	cur.SetName(obj.GetName())
	if err := c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, data), client.FieldOwner(d.fieldOwner)); err != nil {
		return nil, classify(h.at+".patchAfterDeployment", obj, "patching", err)
	}
	return cur, nil
}

// beforeDeletePatch is the merge patch of the record's annotateBeforeDelete
// and patchBeforeDelete, conditional on resourceVersion rv; nil when the
// record has neither.
func beforeDeletePatch(r manifestv1alpha2.ManagedResourceStatus, rv string) ([]byte, error) {
	if len(r.AnnotateBeforeDelete) == 0 && (r.PatchBeforeDelete == nil || len(r.PatchBeforeDelete.Raw) == 0) {
		return nil, nil
	}
	// Validated when recorded; a record edited since must not block the
	// deletion, so a patch that is not an object is left out.
	patch, _ := mergePatch("", r.PatchBeforeDelete)
	if patch == nil {
		patch = map[string]any{}
	}
	md, _ := patch["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	if len(r.AnnotateBeforeDelete) > 0 {
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		for k, v := range r.AnnotateBeforeDelete {
			ann[k] = v
		}
		md["annotations"] = ann
	}
	md["resourceVersion"] = rv
	patch["metadata"] = md
	return json.Marshal(patch)
}

// patchBeforeDelete applies the record's annotateBeforeDelete and
// patchBeforeDelete to cur (updated in place), conditional on the
// resourceVersion read; conflict reports that cur changed meanwhile.
func (d *deployer) patchBeforeDelete(ctx context.Context, c *clusterClient, r manifestv1alpha2.ManagedResourceStatus, cur *unstructured.Unstructured) (conflict bool, err error) {
	data, err := beforeDeletePatch(r, cur.GetResourceVersion())
	if err != nil || data == nil {
		return false, err
	}
	err = c.Patch(ctx, cur, client.RawPatch(types.MergePatchType, data), client.FieldOwner(d.fieldOwner))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return false, nil // gone: the deletion finds it so
	case apierrors.IsConflict(err):
		return true, nil
	}
	return false, classify("status.providerStatus.managedResources.patchBeforeDelete", cur, "patching before deleting", err)
}
