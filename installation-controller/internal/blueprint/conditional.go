package blueprint

import (
	"fmt"

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
