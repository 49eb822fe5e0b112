package tmpl

import (
	"context"
	"text/template"
)

// Inputs are what a caller adds to every render within a context: values
// beside the execution's own and functions beside the executor's. The
// installation controller gives an installation's component version this
// way (.cd, getResource), whatever kind of execution renders.
type Inputs struct {
	// Values are added to the values of each render; a value the
	// execution already has keeps its own.
	Values map[string]any
	// Funcs are added to the executor's functions.
	Funcs template.FuncMap
}

type inputsKey struct{}

// WithInputs returns ctx whose renders (ExecuteContext) get in.
func WithInputs(ctx context.Context, in Inputs) context.Context {
	return context.WithValue(ctx, inputsKey{}, in)
}

// inputsFrom returns the Inputs of ctx and values with them added.
func inputsFrom(ctx context.Context, values map[string]any) (map[string]any, template.FuncMap) {
	in, ok := ctx.Value(inputsKey{}).(Inputs)
	if !ok {
		return values, nil
	}
	if len(in.Values) == 0 {
		return values, in.Funcs
	}
	out := make(map[string]any, len(values)+len(in.Values))
	for k, v := range in.Values {
		out[k] = v
	}
	for k, v := range values {
		out[k] = v
	}
	return out, in.Funcs
}

// guarded wraps the caller's functions like the executor's own, so that
// what they return is charged to the render's budget.
func guarded(funcs template.FuncMap, b *budget) template.FuncMap {
	if len(funcs) == 0 {
		return nil
	}
	out := make(template.FuncMap, len(funcs))
	for name, fn := range funcs {
		out[name] = guard(name, fn, b)
	}
	return out
}
