package blueprint

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/schema"
)

// parseConditionalImports reads the imports nested under the import fd
// (Landscaper's conditional imports): they are only required when fd is
// there, so fd itself must be optional. They are returned flat, after fd,
// each naming the import it depends on.
func parseConditionalImports(item *yaml.Node, fd FieldDefinition, imports bool) ([]FieldDefinition, error) {
	nested := mappingValue(item, "imports")
	if nested == item {
		return nil, nil
	}
	if !imports {
		return nil, errorf(lsv1alpha1.BlueprintFileName, nested.Line, "export %q has nested imports: only an optional import may have conditional imports", fd.Name)
	}
	if fd.Required {
		return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "import %q has conditional imports (nested imports), so it must be optional: add `required: false` to it", fd.Name)
	}
	return parseFields(nested, true, fd.Name)
}

// conditionMet says whether a conditional import's condition holds: the
// import it is nested under has a value (provided or defaulted).
func conditionMet(def FieldDefinition, values map[string]any) bool {
	if def.Condition == "" {
		return true
	}
	_, ok := values[def.Condition]
	return ok
}

// parseSchemaVersion reads jsonSchemaVersion: the URL of a JSON schema
// draft's metaschema.
func parseSchemaVersion(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", errorf(lsv1alpha1.BlueprintFileName, n.Line, "jsonSchemaVersion must be the URL of a JSON schema draft (%s)", schema.KnownDrafts())
	}
	if err := schema.CheckDraft(n.Value); err != nil {
		return "", errorf(lsv1alpha1.BlueprintFileName, n.Line, "jsonSchemaVersion: %v", err)
	}
	return n.Value, nil
}

// conditionNote says why a conditional import is required.
func conditionNote(def FieldDefinition) string {
	if def.Condition == "" {
		return ""
	}
	return fmt.Sprintf(" (a conditional import: required because import %q is set)", def.Condition)
}

// DropUnsatisfiedImports removes from the sub-installations' imports those
// wired to an optional or conditional import of this blueprint that the
// installation does not have (present says which it has), as Landscaper
// does: a sub-installation whose own blueprint declares them optional runs
// without them, one that requires them says so itself.
func (b *Blueprint) DropUnsatisfiedImports(subs []InstallationTemplate, present func(name string) bool) {
	absent := map[valueRef]bool{}
	for _, d := range b.Imports {
		if (d.Required && d.Condition == "") || present(d.Name) {
			continue
		}
		switch d.Type {
		case TypeData:
			absent[valueRef{kindData, d.Name}] = true
		case TypeTarget:
			absent[valueRef{kindTarget, d.Name}] = true
		default:
			absent[valueRef{valueKind(d.Type), d.Name}] = true
		}
	}
	if len(absent) == 0 {
		return
	}
	for i := range subs {
		imp := &subs[i].Imports
		// Cloned first: a static template shares its slices with the blueprint.
		imp.Data = slices.DeleteFunc(slices.Clone(imp.Data), func(d lsv1alpha1.DataImport) bool {
			return d.DataRef != "" && absent[valueRef{kindData, d.DataRef}]
		})
		imp.Targets = slices.DeleteFunc(slices.Clone(imp.Targets), func(t lsv1alpha1.TargetImport) bool {
			return (t.Target != "" && absent[valueRef{kindTarget, t.Target}]) ||
				(t.TargetListReference != "" && absent[valueRef{kindTargetList, t.TargetListReference}]) ||
				(t.TargetMapReference != "" && absent[valueRef{kindTargetMap, t.TargetMapReference}])
		})
	}
}
