package installation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"text/template"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/components"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
	"github.com/terrace-dev/terrace/kit/flow"
)

// loadBlueprint resolves the installation's component version (into
// s.component) and reads its blueprint: inline, or spec.blueprint.ref's
// resource of the component version.
func (r *Reconciler) loadBlueprint(ctx context.Context, s *scope) (*blueprint.Blueprint, error) {
	inst := s.inst
	cv, err := r.resolveComponent(ctx, inst)
	if err != nil {
		return nil, err
	}
	s.component = cv
	ref := inst.Spec.Blueprint.Reference
	if ref == nil {
		return parseBlueprint(inst)
	}
	if cv == nil {
		return nil, flow.Stalledf(ReasonBlueprintInvalid, "spec.blueprint.ref: resource %q needs a component version: set spec.componentDescriptor", ref.ResourceName)
	}
	read, err := r.Components.Blueprint(ctx, cv.cv.Root, components.ResourceRef{Name: ref.ResourceName})
	if err != nil {
		return nil, componentError(ReasonBlueprintInvalid, "spec.blueprint.ref", err)
	}
	bp, err := blueprint.Parse(read.Files)
	if err != nil {
		return nil, flow.StalledError(ReasonBlueprintInvalid, fmt.Errorf("spec.blueprint.ref: resource %q of component %s: %w", ref.ResourceName, read.Component, err))
	}
	return bp, nil
}

// renderContext gives the renders within ctx what Landscaper gives every
// execution beside its own values: .blueprint and .blueprintDef (both
// spec.blueprint), and the component version's inputs .cd, .components and
// .componentDescriptorDef and functions. Without a component version, the
// functions that read it say so.
func (c *componentVersion) renderContext(ctx context.Context, inst *lsv1alpha1.Installation) (context.Context, error) {
	values := make(map[string]any, 5)
	// Two copies: a template that changes one (sprig's set) leaves the other.
	for _, key := range []string{"blueprint", "blueprintDef"} {
		def, err := plainJSON(inst.Spec.Blueprint)
		if err != nil {
			return nil, flow.StalledError(ReasonBlueprintInvalid, fmt.Errorf("spec.blueprint: %w", err))
		}
		values[key] = def
	}
	if c == nil {
		return tmpl.WithInputs(ctx, tmpl.Inputs{Values: values, Funcs: noComponentFuncs()}), nil
	}
	cvValues, err := c.templating.Values(c.def)
	if err != nil {
		return nil, flow.StalledError(ReasonComponentInvalid, fmt.Errorf("spec.componentDescriptor: %w", err))
	}
	maps.Copy(values, cvValues)
	return tmpl.WithInputs(ctx, tmpl.Inputs{Values: values, Funcs: c.templating.FuncMap()}), nil
}

// plainJSON is v as templates see JSON: maps, lists, strings, numbers.
func plainJSON(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// noComponentFuncs are the component functions of an installation without
// spec.componentDescriptor: those that read a component version fail with
// the way out, the OCI reference parsers work.
func noComponentFuncs() template.FuncMap {
	empty, err := components.NewTemplating(&components.ComponentVersion{Root: &components.Component{}})
	if err != nil {
		return nil
	}
	funcs := empty.FuncMap()
	for _, name := range []string{"getResource", "getResources", "getComponent", "getRepositoryContext", "getResourceKey"} {
		funcs[name] = func(...any) (any, error) {
			return nil, fmt.Errorf("%s: the installation has no component version: set spec.componentDescriptor", name)
		}
	}
	return funcs
}

// subBlueprint sets a sub-installation's blueprint and component version
// from its template, as Landscaper does: a cd:// reference becomes
// blueprint.ref of the component that holds the resource; an inline or
// directory blueprint keeps the parent's componentDescriptor.
func (c *componentVersion) subBlueprint(parent *lsv1alpha1.Installation, bp *blueprint.Blueprint, t *blueprint.InstallationTemplate, spec *lsv1alpha1.InstallationSpec) error {
	if t.Blueprint.Ref == nil {
		fs, err := t.Filesystem(bp.Files)
		if err != nil {
			return err
		}
		spec.Blueprint = lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: fs}}
		spec.ComponentDescriptor = parent.Spec.ComponentDescriptor.DeepCopy()
		return nil
	}
	where := fmt.Sprintf("subinstallation %q: blueprint.ref %q", t.Name, t.Blueprint.Ref.URI)
	if len(t.Blueprint.Filesystem) > 0 || t.Blueprint.Dir != "" {
		return fmt.Errorf("%s: give one of ref, filesystem and dir", where)
	}
	if c == nil {
		return fmt.Errorf("%s: the installation has no component version to read it from: set spec.componentDescriptor", where)
	}
	uri, err := components.ParseURI(t.Blueprint.Ref.URI)
	if err != nil {
		return fmt.Errorf("subinstallation %q: blueprint.ref: %w", t.Name, err)
	}
	owner, res, err := c.cv.ResolveURI(c.cv.Root, uri)
	if err != nil {
		return fmt.Errorf("subinstallation %q: blueprint.ref: %w", t.Name, err)
	}
	spec.Blueprint = lsv1alpha1.BlueprintDefinition{Reference: &lsv1alpha1.BlueprintReference{ResourceName: res.Name}}
	if owner == c.cv.Root {
		spec.ComponentDescriptor = parent.Spec.ComponentDescriptor.DeepCopy()
		return nil
	}
	if owner.RepositoryContext == nil {
		return fmt.Errorf("%s: component %s has no repository context", where, owner.Key())
	}
	spec.ComponentDescriptor = &lsv1alpha1.ComponentDescriptorDefinition{Reference: &lsv1alpha1.ComponentDescriptorReference{
		RepositoryContext: owner.RepositoryContext.DeepCopy(),
		ComponentName:     owner.Descriptor.Component.Name,
		Version:           owner.Descriptor.Component.Version,
	}}
	return nil
}
