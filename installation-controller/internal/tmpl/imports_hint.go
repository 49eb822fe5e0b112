package tmpl

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// importPath finds the import an action reached through when it failed:
// text/template names the failing action's pipeline ("at <.imports.x.y>").
var importPath = regexp.MustCompile(`at <\.imports\.([^.>\s]+)`)

// missingImportHint says, for a render that failed inside a pipeline reading
// .imports.<name> when the blueprint has no import of that name, which imports
// there are. A misspelled import is zero (the template's missingkey=zero),
// and the failure text/template reports is about the next step ("nil pointer
// evaluating interface {}.metadata"), which does not name the cause.
func missingImportHint(err error, values map[string]any) string {
	var te template.ExecError
	if !errors.As(err, &te) {
		return ""
	}
	m := importPath.FindStringSubmatch(te.Err.Error())
	if m == nil {
		return ""
	}
	imports, _ := values["imports"].(map[string]any)
	if _, ok := imports[m[1]]; ok {
		return ""
	}
	names := slices.Sorted(maps.Keys(imports))
	if len(names) == 0 {
		return fmt.Sprintf("; the blueprint has no import %q (it has none)", m[1])
	}
	return fmt.Sprintf("; the blueprint has no import %q (its imports: %s)", m[1], strings.Join(names, ", "))
}
