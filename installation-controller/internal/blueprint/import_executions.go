package blueprint

import (
	"context"
	"fmt"
	"strings"

	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

// Keys of an import execution's rendered document.
const (
	importBindingsKey = "bindings"
	importErrorsKey   = "errors"
)

// maxReportedErrors is how many of an import execution's errors the
// installation's lastError lists.
const maxReportedErrors = 10

// ImportExecutionError is the list of errors an import execution rendered:
// the blueprint refuses its imports.
type ImportExecutionError struct {
	Execution string
	File      string
	Errors    []string
}

func (e *ImportExecutionError) Error() string {
	shown := e.Errors
	more := ""
	if len(shown) > maxReportedErrors {
		shown, more = shown[:maxReportedErrors], fmt.Sprintf("; and %d more", len(e.Errors)-maxReportedErrors)
	}
	return fmt.Sprintf("import execution %q (%s) refuses the imports: %s%s", e.Execution, e.File, strings.Join(shown, "; "), more)
}

// RunImportExecutions runs the import executions in order over values (the
// standard binding, with the checked imports under "imports"). Each one may
// render `bindings`, added to the imports (replacing an import of the same
// name) for the executions after it and for every other execution, and
// `errors`, which fail the installation with those messages. It returns the
// imports with every binding added.
func (b *Blueprint) RunImportExecutions(ctx context.Context, values map[string]any) (map[string]any, error) {
	imports, _ := values["imports"].(map[string]any)
	if len(b.ImportExecutions) == 0 {
		return imports, nil
	}
	merged := make(map[string]any, len(imports))
	for k, v := range imports {
		merged[k] = v
	}
	for _, ex := range b.ImportExecutions {
		in := make(map[string]any, len(values))
		for k, v := range values {
			in[k] = v
		}
		in["imports"] = merged
		doc, err := tmpl.ExecuteContext(ctx, b.source(ex), in)
		if err != nil {
			return nil, err
		}
		bindings, errs, err := importExecutionOutput(ex, doc)
		if err != nil {
			return nil, err
		}
		if len(errs) > 0 {
			return nil, &ImportExecutionError{Execution: ex.Name, File: ex.File, Errors: errs}
		}
		for k, v := range bindings {
			merged[k] = v
		}
	}
	return merged, nil
}

// importExecutionOutput reads an import execution's document: a mapping
// `bindings` and a list of strings `errors`, both optional.
func importExecutionOutput(ex Execution, doc map[string]any) (map[string]any, []string, error) {
	bindings, err := renderedMapping(ex, doc, importBindingsKey, importErrorsKey)
	if err != nil {
		return nil, nil, err
	}
	raw, ok := doc[importErrorsKey]
	if !ok || raw == nil {
		return bindings, nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, nil, shapeError(ex, importErrorsKey, raw, "a list of strings")
	}
	errs := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, nil, fmt.Errorf("execution %q (%s): the rendered %q[%d] is %s, it must be a string", ex.Name, ex.File, importErrorsKey, i, shapeOf(e))
		}
		errs = append(errs, s)
	}
	return bindings, errs, nil
}
