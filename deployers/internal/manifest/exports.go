package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// exports reads the configured exports from the target cluster. An object or
// a path that does not exist yet (e.g. a Secret an operator generates, a load
// balancer's address) makes it wait: pending names what is missing.
func (d *deployer) exports(ctx context.Context, c *clusterClient, cfg *config) (data []byte, pending string, err error) {
	var list []manifestv1alpha2.Export
	if cfg.spec.Exports != nil {
		list = cfg.spec.Exports.Exports
	}
	if len(list) == 0 && len(cfg.values) == 0 {
		return nil, "", nil
	}
	out := maps.Clone(cfg.values)
	if out == nil {
		out = map[string]any{}
	}
	for i, e := range list {
		field := cfg.exportField(i)
		if e.Key == "" || e.FromResource == nil || e.JSONPath == "" {
			return nil, "", lib.ConfigError(lib.ReasonInvalidConfig, "%s: key, jsonPath and fromResource must be set", field)
		}
		v, pending, err := exportValue(ctx, c, cfg, field, e)
		if err != nil || pending != "" {
			return nil, pending, err
		}
		out[e.Key] = v
	}
	data, err = json.Marshal(out)
	return data, "", err
}

// exportValue reads one export: the value at jsonPath in fromResource, or,
// with fromObjectRef, in the object the value there refers to.
func exportValue(ctx context.Context, c *clusterClient, cfg *config, field string, e manifestv1alpha2.Export) (v any, pending string, err error) {
	r := *e.FromResource
	cur, pending, err := readExportSource(ctx, c, cfg, field+".fromResource", e.Key, r)
	if err != nil || pending != "" {
		return nil, pending, err
	}
	v, found, err := lib.JSONPathValue(cur.Object, e.JSONPath)
	if err != nil {
		return nil, "", lib.ConfigError(ReasonExportFailed, "%s.jsonPath: %v", field, err)
	}
	if !found {
		return nil, fmt.Sprintf("export %q: %s has no value at %s yet", e.Key, refString(r), e.JSONPath), nil
	}
	ref := e.FromObjectReference
	if ref == nil {
		return v, "", nil
	}
	if ref.APIVersion == "" || ref.Kind == "" || ref.JSONPath == "" {
		return nil, "", lib.ConfigError(lib.ReasonInvalidConfig, "%s.fromObjectRef: apiVersion, kind and jsonPath must be set", field)
	}
	m, _ := v.(map[string]any)
	name, _ := m["name"].(string)
	ns, _ := m["namespace"].(string)
	if name == "" {
		return nil, "", lib.ConfigError(ReasonExportFailed, "%s.jsonPath: the value at %s in %s is not an object reference with a name", field, e.JSONPath, refString(r))
	}
	if ns == "" {
		ns = r.Namespace
	}
	target := manifestv1alpha2.TypedObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: name, Namespace: ns}
	cur, pending, err = readExportSource(ctx, c, cfg, field+".fromObjectRef", e.Key, target)
	if err != nil || pending != "" {
		return nil, pending, err
	}
	v, found, err = lib.JSONPathValue(cur.Object, ref.JSONPath)
	if err != nil {
		return nil, "", lib.ConfigError(ReasonExportFailed, "%s.fromObjectRef.jsonPath: %v", field, err)
	}
	if !found {
		return nil, fmt.Sprintf("export %q: %s has no value at %s yet", e.Key, refString(target), ref.JSONPath), nil
	}
	return v, "", nil
}

// readExportSource reads the object r names; pending says it is missing.
func readExportSource(ctx context.Context, c *clusterClient, cfg *config, field, key string, r manifestv1alpha2.TypedObjectReference) (*unstructured.Unstructured, string, error) {
	cur := &unstructured.Unstructured{}
	cur.SetAPIVersion(r.APIVersion)
	cur.SetKind(r.Kind)
	if err := needsNamespace(c, cur, r, field, lib.ReasonInvalidConfig); err != nil {
		return nil, "", err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, cur); err != nil {
		if apierrors.IsNotFound(err) {
			// Like a missing value: somebody (an operator, a controller)
			// may create it later; the item's timeout bounds the wait.
			if ownManifest(cfg, r) {
				return nil, fmt.Sprintf("export %q: %s, one of this item's manifests, is missing on the target cluster", key, refString(r)), nil
			}
			return nil, fmt.Sprintf("export %q: %s does not exist on the target cluster yet", key, refString(r)), nil
		}
		return nil, "", classify(field, cur, "reading", err)
	}
	return cur, "", nil
}

// ownManifest reports whether r names one of the objects cfg applies (apply
// has resolved their namespaces).
func ownManifest(cfg *config, r manifestv1alpha2.TypedObjectReference) bool {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return slices.ContainsFunc(cfg.objects, func(m manifestEntry) bool {
		gvk := m.obj.GroupVersionKind()
		return m.policy != manifestv1alpha2.IgnorePolicy && gvk.Group == gv.Group && gvk.Kind == r.Kind &&
			m.obj.GetName() == r.Name && m.obj.GetNamespace() == r.Namespace
	})
}
