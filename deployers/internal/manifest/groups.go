package manifest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// ReasonDeletionGroupInvalid: a deletion group of the configuration is malformed.
const ReasonDeletionGroupInvalid = "InvalidDeletionGroup"

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// deletionStep is one group of an ordered deletion: which recorded objects
// it takes, and what it does beyond deleting them.
type deletionStep struct {
	selects func(d deletion) bool
	// custom is the group's definition when it is a custom group (for
	// deleteAllResources).
	custom *manifestv1alpha2.CustomResourceGroup
	force  bool
}

// defaultSteps delete namespaced objects, then cluster-scoped ones, then
// namespaces, then CRDs (the reverse of the order of applying).
func defaultSteps() []deletionStep {
	steps := make([]deletionStep, 0, 4)
	for r := 3; r >= 0; r-- {
		steps = append(steps, deletionStep{selects: func(d deletion) bool { return d.rank == r }})
	}
	return steps
}

// stepsOf turns configured deletion groups into steps; none configured
// means the default order. validateDeletionGroups has checked their shape.
func stepsOf(c *clusterClient, groups []manifestv1alpha2.DeletionGroupDefinition) []deletionStep {
	if len(groups) == 0 {
		return defaultSteps()
	}
	steps := make([]deletionStep, 0, len(groups))
	for _, g := range groups {
		if p := g.PredefinedResourceGroup; p != nil {
			steps = append(steps, deletionStep{selects: predefinedSelector(p.Type), force: p.ForceDelete})
			continue
		}
		cg := g.CustomResourceGroup
		steps = append(steps, deletionStep{custom: cg, force: cg.ForceDelete, selects: func(d deletion) bool {
			return slices.ContainsFunc(cg.Resources, func(rt manifestv1alpha2.ResourceType) bool { return matchesType(c, rt, d.obj) })
		}})
	}
	return steps
}

func predefinedSelector(t manifestv1alpha2.PredefinedResourceGroupType) func(deletion) bool {
	switch t {
	case manifestv1alpha2.PredefinedResourceGroupNamespacedResources:
		return func(d deletion) bool { return d.obj.GetNamespace() != "" }
	case manifestv1alpha2.PredefinedResourceGroupClusterScopedResources:
		return func(d deletion) bool {
			return d.obj.GetNamespace() == "" && d.obj.GroupVersionKind().GroupKind() != crdKind
		}
	case manifestv1alpha2.PredefinedResourceGroupCRDs:
		return func(d deletion) bool { return d.obj.GroupVersionKind().GroupKind() == crdKind }
	}
	return func(deletion) bool { return false }
}

// matchesType reports whether rt selects obj: same group, the kind or its
// resource name (either case), and the names and namespaces if listed.
func matchesType(c *clusterClient, rt manifestv1alpha2.ResourceType, obj *unstructured.Unstructured) bool {
	gv, err := schema.ParseGroupVersion(rt.APIVersion)
	gvk := obj.GroupVersionKind()
	if err != nil || gv.Group != gvk.Group || !sameKind(c, rt.Kind, gvk) {
		return false
	}
	return (len(rt.Names) == 0 || slices.Contains(rt.Names, obj.GetName())) &&
		(len(rt.Namespaces) == 0 || slices.Contains(rt.Namespaces, obj.GetNamespace()))
}

func sameKind(c *clusterClient, kind string, gvk schema.GroupVersionKind) bool {
	if strings.EqualFold(kind, gvk.Kind) {
		return true
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && strings.EqualFold(kind, m.Resource.Resource)
}

// validateDeletionGroups checks the groups' shape before anything is
// applied; field is e.g. spec.config.deletionGroups.
func validateDeletionGroups(field string, groups []manifestv1alpha2.DeletionGroupDefinition) error {
	for i, g := range groups {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case (g.PredefinedResourceGroup == nil) == (g.CustomResourceGroup == nil):
			return lib.ConfigError(ReasonDeletionGroupInvalid, "%s: set exactly one of predefinedResourceGroup and customResourceGroup", f)
		case g.PredefinedResourceGroup != nil:
			switch g.PredefinedResourceGroup.Type {
			case manifestv1alpha2.PredefinedResourceGroupNamespacedResources, manifestv1alpha2.PredefinedResourceGroupClusterScopedResources,
				manifestv1alpha2.PredefinedResourceGroupCRDs, manifestv1alpha2.PredefinedResourceGroupEmpty:
			default:
				return lib.ConfigError(ReasonDeletionGroupInvalid, "%s.predefinedResourceGroup.type: %q is not one of namespaced-resources, cluster-scoped-resources, crds, empty",
					f, g.PredefinedResourceGroup.Type)
			}
		default:
			rs := g.CustomResourceGroup.Resources
			if len(rs) == 0 {
				return lib.ConfigError(ReasonDeletionGroupInvalid, "%s.customResourceGroup.resources: must name at least one resource type", f)
			}
			for j, r := range rs {
				if _, err := schema.ParseGroupVersion(r.APIVersion); err != nil || r.APIVersion == "" || r.Kind == "" {
					return lib.ConfigError(ReasonDeletionGroupInvalid, "%s.customResourceGroup.resources[%d]: apiVersion and kind must be set (apiVersion %q, kind %q)", f, j, r.APIVersion, r.Kind)
				}
			}
		}
	}
	return nil
}

// everyObjectOf lists the objects on the target that a custom group with
// deleteAllResources selects, whoever made them.
func everyObjectOf(ctx context.Context, c *clusterClient, cg *manifestv1alpha2.CustomResourceGroup) ([]deletion, error) {
	var out []deletion
	for _, rt := range cg.Resources {
		gvk, err := resolveKind(c, rt)
		if err != nil {
			return nil, err
		}
		if gvk.Empty() {
			continue // not served: nothing to delete
		}
		namespaces := rt.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{""}
		}
		for _, ns := range namespaces {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				probe := &unstructured.Unstructured{}
				probe.SetGroupVersionKind(gvk)
				return nil, classify("deletionGroups.customResourceGroup", probe, "listing", err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				if len(rt.Names) > 0 && !slices.Contains(rt.Names, obj.GetName()) {
					continue
				}
				out = append(out, deletion{res: manifestv1alpha2.ManagedResourceStatus{Policy: manifestv1alpha2.ManagePolicy, Resource: ref(obj)}, obj: obj, any: true})
			}
		}
	}
	return out, nil
}

// resolveKind finds the kind rt names (a kind or a resource name); the
// zero kind when the target does not serve it.
func resolveKind(c *clusterClient, rt manifestv1alpha2.ResourceType) (schema.GroupVersionKind, error) {
	gv, _ := schema.ParseGroupVersion(rt.APIVersion)
	if gvk, err := c.mapper.KindFor(gv.WithResource(strings.ToLower(rt.Kind))); err == nil {
		return gvk, nil
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: rt.Kind}, gv.Version)
	if err != nil {
		return schema.GroupVersionKind{}, nil //nolint:nilerr // a kind the target does not serve has no objects to delete
	}
	return m.GroupVersionKind, nil
}
