package blueprint

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/schema"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

// ImportError is an import that is missing or invalid.
type ImportError struct {
	Name string
	Msg  string
}

func (e *ImportError) Error() string { return fmt.Sprintf("import %q: %s", e.Name, e.Msg) }

// ProvidedTarget is a target import as the installation provides it: its
// kind (TypeTarget, TypeTargetList or TypeTargetMap) and the types of its
// Targets by member ("" for a single target, "[0]" or "[key]" for the
// entries of a list or map).
type ProvidedTarget struct {
	Kind  string
	Types map[string]string
}

// CompleteImports checks the values an installation provides against the
// blueprint's import definitions: required imports must be present, optional
// ones get their default, data values must match their schema and targets
// their targetType. targetTypes maps each (single) target import to its
// Target's type. It returns the values templates see as .imports.
func (b *Blueprint) CompleteImports(values map[string]any, targetTypes map[string]string) (map[string]any, error) {
	provided := map[string]ProvidedTarget{}
	for name, typ := range targetTypes {
		provided[name] = ProvidedTarget{Kind: TypeTarget, Types: map[string]string{"": typ}}
	}
	return b.CompleteImportsContext(context.Background(), values, provided)
}

// CompleteImportsContext is CompleteImports within ctx, whose deadline is
// the reconcile's, for target imports of every kind.
func (b *Blueprint) CompleteImportsContext(ctx context.Context, values map[string]any, targets map[string]ProvidedTarget) (map[string]any, error) {
	schemas, err := b.schemas()
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(values))
	for k, v := range values {
		out[k] = v
	}
	for _, def := range b.Imports {
		v, ok := out[def.Name]
		if !ok {
			switch {
			case def.HasDefault:
				out[def.Name] = def.Default
				continue
			case def.Required && conditionMet(def, out):
				return nil, &ImportError{Name: def.Name, Msg: fmt.Sprintf("the blueprint requires this %s import%s, but the installation does not provide it (add it to spec.imports.%s)", def.Type, conditionNote(def), specList(def.Type))}
			default:
				continue
			}
		}
		if IsTargetType(def.Type) {
			if err := checkTargetImport(def, targets); err != nil {
				return nil, err
			}
			continue
		}
		if err := schemas.Validate(ctx, importField(def.Name), v); err != nil {
			return nil, &ImportError{Name: def.Name, Msg: err.Error()}
		}
	}
	return out, nil
}

// checkTargetImport checks that a target import is provided in the kind
// the blueprint declares, and each of its Targets has the declared type.
func checkTargetImport(def FieldDefinition, targets map[string]ProvidedTarget) error {
	p, isTarget := targets[def.Name]
	if !isTarget {
		return &ImportError{Name: def.Name, Msg: fmt.Sprintf("the blueprint declares a %s import, but the installation provides it as data (use spec.imports.targets)", def.Type)}
	}
	if p.Kind != def.Type {
		return &ImportError{Name: def.Name, Msg: fmt.Sprintf("the blueprint declares a %s import, but spec.imports.targets provides a %s (%s)", def.Type, p.Kind, targetFieldOf(def.Type))}
	}
	if def.TargetType == "" {
		return nil
	}
	for _, member := range sortedKeys(p.Types) {
		if tt := p.Types[member]; lsv1alpha1.FullTargetType(tt) != def.TargetType {
			return &ImportError{Name: def.Name, Msg: fmt.Sprintf("target%s has type %q, the blueprint requires %q", member, tt, def.TargetType)}
		}
	}
	return nil
}

// targetFieldOf names the fields of a target import that provide a kind.
func targetFieldOf(kind string) string {
	switch kind {
	case TypeTargetList:
		return "a targetList is given by targets or targetListRef"
	case TypeTargetMap:
		return "a targetMap is given by targetMap or targetMapRef"
	}
	return "a target is given by target"
}

func specList(typ string) string {
	if IsTargetType(typ) {
		return "targets"
	}
	return "data"
}

// ValidateExports checks export values against the blueprint's export schemas.
func (b *Blueprint) ValidateExports(values map[string]any) error {
	return b.ValidateExportsContext(context.Background(), values)
}

// ValidateExportsContext is ValidateExports within ctx, whose deadline is
// the reconcile's.
func (b *Blueprint) ValidateExportsContext(ctx context.Context, values map[string]any) error {
	schemas, err := b.schemas()
	if err != nil {
		return err
	}
	for _, def := range b.Exports {
		v, ok := values[def.Name]
		if !ok || def.Type != TypeData {
			continue
		}
		if err := schemas.Validate(ctx, exportField(def.Name), v); err != nil {
			return err
		}
	}
	return nil
}

func importField(name string) string { return "import " + name }

func exportField(name string) string { return "export " + name }

// schemas returns the blueprint's data schemas compiled, with its localTypes
// and files to refer to; a blueprint seen before is found in the schema
// package's cache.
func (b *Blueprint) schemas() (*schema.Set, error) {
	fields := map[string]any{}
	for _, def := range b.Imports {
		if def.Type == TypeData && def.Schema != nil {
			fields[importField(def.Name)] = def.Schema
		}
	}
	for _, def := range b.Exports {
		if def.Type == TypeData && def.Schema != nil {
			fields[exportField(def.Name)] = def.Schema
		}
	}
	return schema.Compile(schema.Document{Fields: fields, LocalTypes: b.LocalTypes, Files: b.Files, DefaultDraft: b.JSONSchemaVersion})
}

func (b *Blueprint) source(ex Execution) tmpl.Source {
	return tmpl.Source{Execution: ex.Name, File: ex.File, Line: ex.Line, Template: ex.Template, Files: b.Files}
}

// renderedItem is one deploy item as a deploy execution writes it.
type renderedItem struct {
	Name      string               `json:"name"`
	Type      string               `json:"type"`
	Target    *itemTarget          `json:"target,omitempty"`
	Labels    map[string]string    `json:"labels,omitempty"`
	Config    runtime.RawExtension `json:"config"`
	DependsOn []string             `json:"dependsOn,omitempty"`
	Timeout   *lsv1alpha1.Duration `json:"timeout,omitempty"`
	// UpdateOnChangeOnly and OnDelete pass through to the execution.
	UpdateOnChangeOnly bool                       `json:"updateOnChangeOnly,omitempty"`
	OnDelete           *lsv1alpha1.OnDeleteConfig `json:"onDelete,omitempty"`
}

// DeployItems runs the deploy executions and returns the execution's items.
// targetNames maps target imports to the Target objects they resolve to,
// so `target: {import: cluster}` becomes a reference to that Target.
func (b *Blueprint) DeployItems(values map[string]any, targetNames map[string]string) ([]lsv1alpha1.DeployItemTemplate, error) {
	return b.DeployItemsContext(context.Background(), values, ImportedTargets{Single: targetNames})
}

// DeployItemsContext is DeployItems within ctx, for target imports of every
// kind: every render stops at ctx's deadline, the reconcile's.
func (b *Blueprint) DeployItemsContext(ctx context.Context, values map[string]any, targets ImportedTargets) ([]lsv1alpha1.DeployItemTemplate, error) {
	return b.deployItems(ctx, values, targets, nil, nil)
}

// deployItems renders the deploy executions, each with its state of prev,
// and records the states they render in written (when not nil).
func (b *Blueprint) deployItems(ctx context.Context, values map[string]any, targets ImportedTargets, prev, written State) ([]lsv1alpha1.DeployItemTemplate, error) {
	var items []lsv1alpha1.DeployItemTemplate
	seen := map[string]string{}
	for _, ex := range b.DeployExecutions {
		out, err := tmpl.ExecuteContext(ctx, b.source(ex), withState(values, prev[DeployStateKey(ex.Name)]))
		if err != nil {
			return nil, err
		}
		list, err := renderedList(ex, out, "deployItems", stateKey)
		if err != nil {
			return nil, err
		}
		recordState(out, DeployStateKey(ex.Name), written)
		var rendered []renderedItem
		if err := reencode(list, &rendered); err != nil {
			return nil, fmt.Errorf("execution %q (%s): the rendered deployItems are not deploy items: %w", ex.Name, ex.File, err)
		}
		for _, ri := range rendered {
			if prev, dup := seen[ri.Name]; dup {
				return nil, fmt.Errorf("execution %q (%s): deploy item %q is also rendered by execution %q", ex.Name, ex.File, ri.Name, prev)
			}
			seen[ri.Name] = ex.Name
			it := lsv1alpha1.DeployItemTemplate{Name: ri.Name, Type: ri.Type, Labels: ri.Labels, Config: ri.Config, DependsOn: ri.DependsOn, Timeout: ri.Timeout,
				UpdateOnChangeOnly: ri.UpdateOnChangeOnly, OnDelete: ri.OnDelete}
			if ri.Target != nil {
				switch {
				case ri.Target.Import != "":
					name, err := targets.resolve(ri.Target)
					if err != nil {
						return nil, fmt.Errorf("execution %q (%s): deploy item %q: %w", ex.Name, ex.File, ri.Name, err)
					}
					it.Target = &lsv1alpha1.ObjectReference{Name: name}
				case ri.Target.Name != "":
					it.Target = &lsv1alpha1.ObjectReference{Name: ri.Target.Name, Namespace: ri.Target.Namespace}
				}
			}
			items = append(items, it)
		}
	}
	return items, nil
}

// SubinstallationTemplates returns the static sub-installations followed by
// those the subinstallation executions render.
func (b *Blueprint) SubinstallationTemplates(values map[string]any) ([]InstallationTemplate, error) {
	return b.SubinstallationTemplatesContext(context.Background(), values)
}

// SubinstallationTemplatesContext is SubinstallationTemplates within ctx:
// every render stops at ctx's deadline, the reconcile's.
func (b *Blueprint) SubinstallationTemplatesContext(ctx context.Context, values map[string]any) ([]InstallationTemplate, error) {
	out := append([]InstallationTemplate(nil), b.Subinstallations...)
	for _, ex := range b.SubinstallationExecutions {
		doc, err := tmpl.ExecuteContext(ctx, b.source(ex), values)
		if err != nil {
			return nil, err
		}
		list, err := renderedList(ex, doc, "subinstallations")
		if err != nil {
			return nil, err
		}
		for i, raw := range list {
			m, ok := raw.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("execution %q (%s): subinstallations[%d] is not a mapping", ex.Name, ex.File, i)
			}
			t, err := DecodeInstallationTemplate(m)
			if err != nil {
				return nil, fmt.Errorf("execution %q (%s): subinstallations[%d]: %w", ex.Name, ex.File, i, err)
			}
			out = append(out, *t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if err := b.checkSubinstallations(out); err != nil {
		return nil, err
	}
	return out, nil
}

// RenderExports runs the export executions and merges their `exports` maps.
func (b *Blueprint) RenderExports(values map[string]any) (map[string]any, error) {
	return b.RenderExportsContext(context.Background(), values)
}

// RenderExportsContext is RenderExports within ctx: every render stops at
// ctx's deadline, the reconcile's. A render that fails reading an entry one
// of the collections does not have says which entries there are.
func (b *Blueprint) RenderExportsContext(ctx context.Context, values map[string]any, collections ...tmpl.Collection) (map[string]any, error) {
	return b.renderExports(ctx, values, nil, nil, collections)
}

// renderExports renders the export executions, each with its state of
// prev, and records the states they render in written (when not nil).
func (b *Blueprint) renderExports(ctx context.Context, values map[string]any, prev, written State, collections []tmpl.Collection) (map[string]any, error) {
	exports := map[string]any{}
	for _, ex := range b.ExportExecutions {
		src := b.source(ex)
		src.Collections = collections
		doc, err := tmpl.ExecuteContext(ctx, src, withState(values, prev[ExportStateKey(ex.Name)]))
		if err != nil {
			return nil, err
		}
		m, err := renderedMapping(ex, doc, "exports", stateKey)
		if err != nil {
			return nil, err
		}
		recordState(doc, ExportStateKey(ex.Name), written)
		for k, v := range m {
			exports[k] = v
		}
	}
	return exports, nil
}

func reencode(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// renderedList returns the list under key, the only top-level key an
// execution's rendered document may have. A document that renders empty, or
// whose key renders empty (a range over nothing), is an empty list. Anything
// else is an error: reading a mapping, or a misspelled key, as "no items"
// would make the installation delete every item or sub-installation it has.
func renderedList(ex Execution, doc map[string]any, key string, also ...string) ([]any, error) {
	v, err := renderedValue(ex, doc, key, "a list", also...)
	if err != nil || v == nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, shapeError(ex, key, v, "a list")
	}
	return list, nil
}

// renderedMapping is renderedList for a document whose key holds a mapping.
func renderedMapping(ex Execution, doc map[string]any, key string, also ...string) (map[string]any, error) {
	v, err := renderedValue(ex, doc, key, "a mapping", also...)
	if err != nil || v == nil {
		return nil, err
	}
	m, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, shapeError(ex, key, v, "a mapping")
	}
	return m, nil
}

// renderedValue returns doc's key; the keys in also (say "state") are the
// only others the document may have.
func renderedValue(ex Execution, doc map[string]any, key, want string, also ...string) (any, error) {
	var unknown []string
	for k := range doc {
		if k != key && !slices.Contains(also, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if len(also) > 0 {
			return nil, fmt.Errorf("execution %q (%s): the rendered document has unknown top-level key(s) %q: it may have only %q (%s) and %q", ex.Name, ex.File, unknown, key, want, also)
		}
		return nil, fmt.Errorf("execution %q (%s): the rendered document has unknown top-level key(s) %q: it must have only %q (%s)", ex.Name, ex.File, unknown, key, want)
	}
	return doc[key], nil
}

func shapeError(ex Execution, key string, v any, want string) error {
	return fmt.Errorf("execution %q (%s): the rendered %q is %s, it must be %s", ex.Name, ex.File, key, shapeOf(v), want)
}

// shapeOf names the YAML shape of a decoded value for error messages.
func shapeOf(v any) string {
	switch v.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
