// Package mapping evaluates data mappings as Landscaper writes them: each
// mapping is a YAML/JSON value whose maps and lists keep their shape, whose
// strings of the form `(( expression ))` are Spiff expressions over the
// imports (or exports) by name, and whose other scalars are literals.
// Terrace also reads CEL (github.com/google/cel-go) at the top of a
// mapping: a string prefixed `cel:` sees the values as
// one variable, `imports` or `exports`.
package mapping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Variable names.
const (
	ImportsVar = "imports"
	ExportsVar = "exports"
)

// CELPrefix marks a top-level mapping string as CEL.
const CELPrefix = "cel:"

// Error is a mapping that failed to parse or evaluate.
type Error struct {
	Name string
	// Path is where in the mapping's value the failing expression sits,
	// e.g. `.endpoint.host` or `[0]`; empty for the whole value.
	Path       string
	Expression string
	Cause      string
	// err is the underlying error, for errors.Is (ErrRenderDeadline).
	err error
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.err }

func (e *Error) Error() string {
	return fmt.Sprintf("data mapping %q%s (%s): %s", e.Name, e.Path, e.Expression, e.Cause)
}

// ErrRenderDeadline is the error (errors.Is) of a mapping stopped by the
// reconcile's deadline; errors.Is(err, context.DeadlineExceeded) holds too.
var ErrRenderDeadline = errors.New("the reconcile's render deadline was exceeded")

// ctxError says why ctx, the reconcile's, ended the evaluation.
func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (%w)", ErrRenderDeadline, context.DeadlineExceeded)
	}
	return fmt.Errorf("the reconcile was cancelled: %w", ctx.Err())
}

// Mappings are parsed data mappings by name.
type Mappings map[string]any

// spiffValue is a string `(( … ))` of a mapping, parsed.
type spiffValue struct {
	written string
	expr    expr
}

// celValue is a top-level CEL mapping.
type celValue struct{ src string }

// Parse decodes and parses mapping values (JSON). Every expression is
// parsed here, so one outside the supported Spiff subset fails before any
// is evaluated.
func Parse(raw map[string][]byte) (Mappings, error) {
	out := make(Mappings, len(raw))
	for name, v := range raw {
		var val any
		if err := json.Unmarshal(v, &val); err != nil {
			return nil, &Error{Name: name, Expression: string(v), Cause: "the mapping is not JSON: " + err.Error()}
		}
		if s, ok := val.(string); ok && strings.HasPrefix(s, CELPrefix) {
			out[name] = &celValue{src: strings.TrimSpace(strings.TrimPrefix(s, CELPrefix))}
			continue
		}
		parsed, err := parseValue(name, "", val, 0)
		if err != nil {
			return nil, err
		}
		out[name] = parsed
	}
	return out, nil
}

// parseValue walks a mapping value, parsing its `(( … ))` strings.
func parseValue(name, path string, v any, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, &Error{Name: name, Path: path, Expression: "…", Cause: fmt.Sprintf("the value is nested deeper than %d levels, the limit", MaxDepth)}
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, el := range v {
			p, err := parseValue(name, path+"."+k, el, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, el := range v {
			p, err := parseValue(name, fmt.Sprintf("%s[%d]", path, i), el, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case string:
		return parseString(name, path, v)
	}
	return v, nil
}

// parseString parses a string that is exactly `(( … ))`; `((!` escapes a
// literal `((`, as in Spiff; any other string is a literal.
func parseString(name, path, s string) (any, error) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "((!"):
		return strings.Replace(s, "((!", "((", 1), nil
	case !strings.HasPrefix(t, "(("):
		return s, nil
	case !strings.HasSuffix(t, "))") || len(t) < 4:
		return nil, &Error{Name: name, Path: path, Expression: s, Cause: "a string starting with (( must end with )) (write ((! for a literal (( )"}
	}
	open := strings.Index(s, "((") + 2
	closing := strings.LastIndex(s, "))")
	e, err := parseSpiff(s[:closing], open)
	if err != nil {
		return nil, &Error{Name: name, Path: path, Expression: s, Cause: err.Error(), err: err}
	}
	return &spiffValue{written: s, expr: e}, nil
}

// Evaluate runs every mapping with the values vars and returns the results
// by mapping name.
func Evaluate(m Mappings, varName string, vars map[string]any) (map[string]any, error) {
	return EvaluateContext(context.Background(), m, varName, vars)
}

// EvaluateContext is Evaluate within ctx, whose deadline is the reconcile's:
// each mapping stops there (ErrRenderDeadline) if Timeout does not stop it
// first. Mappings are evaluated in name order and see only vars (not each
// other's results), so the outcome does not depend on order.
func EvaluateContext(ctx context.Context, m Mappings, varName string, vars map[string]any) (map[string]any, error) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	normalized, _ := toCEL(vars).(map[string]any)
	if normalized == nil {
		normalized = map[string]any{}
	}
	kind := map[string]string{ImportsVar: "import", ExportsVar: "export"}[varName]
	ev := &evaluator{
		spiff: &spiffEval{ctx: ctx, vars: normalized, kind: kind},
		cel:   &celEval{varName: varName, input: map[string]any{varName: normalized}},
	}
	out := make(map[string]any, len(m))
	for _, name := range names {
		v, err := ev.value(ctx, name, "", m[name])
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

type evaluator struct {
	spiff *spiffEval
	cel   *celEval
}

func (ev *evaluator) value(ctx context.Context, name, path string, v any) (any, error) {
	if ctx.Err() != nil {
		err := ctxError(ctx)
		return nil, &Error{Name: name, Path: path, Expression: "…", Cause: err.Error(), err: err}
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, el := range v {
			r, err := ev.value(ctx, name, path+"."+k, el)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, el := range v {
			r, err := ev.value(ctx, name, fmt.Sprintf("%s[%d]", path, i), el)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case *spiffValue:
		r, err := ev.spiff.eval(v.expr)
		if err != nil {
			return nil, &Error{Name: name, Path: path, Expression: v.written, Cause: err.Error(), err: err}
		}
		return jsonShape(r), nil
	case *celValue:
		r, err := ev.cel.eval(ctx, v.src)
		if err != nil {
			return nil, &Error{Name: name, Path: path, Expression: v.src, Cause: err.Error(), err: err}
		}
		return r, nil
	}
	return v, nil
}

// jsonShape copies a Spiff result with its integers as float64, the shape
// of decoded JSON that the rest of the controller works with. It copies
// because a reference returns the evaluator's own values.
func jsonShape(v any) any {
	switch t := v.(type) {
	case int64:
		return float64(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, el := range t {
			out[k] = jsonShape(el)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, el := range t {
			out[i] = jsonShape(el)
		}
		return out
	}
	return v
}
