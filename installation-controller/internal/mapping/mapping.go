// Package mapping evaluates data mappings: each mapping is a CEL expression
// (github.com/google/cel-go) over one variable holding a map of values —
// `imports` for importDataMappings, `exports` for exportDataMappings — and
// its JSON result becomes a new value under the mapping's name.
package mapping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Variable names.
const (
	ImportsVar = "imports"
	ExportsVar = "exports"
)

// Error is a mapping that failed to compile or evaluate.
type Error struct {
	Name       string
	Expression string
	Cause      string
	// err is the underlying error, for errors.Is (ErrRenderDeadline).
	err error
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.err }

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

func (e *Error) Error() string {
	return fmt.Sprintf("data mapping %q (%s): %s", e.Name, e.Expression, e.Cause)
}

// Expressions converts mapping values to expression strings: each value must
// be a JSON string holding a CEL expression.
func Expressions(raw map[string][]byte) (map[string]string, error) {
	out := make(map[string]string, len(raw))
	for name, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, &Error{Name: name, Expression: string(v), Cause: "a data mapping must be a string holding a CEL expression"}
		}
		out[name] = s
	}
	return out, nil
}

// Evaluate runs every expression with varName bound to vars and returns the
// results by mapping name. Mappings are evaluated in name order and see only
// vars (not each other's results), so the outcome does not depend on order.
func Evaluate(exprs map[string]string, varName string, vars map[string]any) (map[string]any, error) {
	return EvaluateContext(context.Background(), exprs, varName, vars)
}

// EvaluateContext is Evaluate within ctx, whose deadline is the reconcile's:
// each mapping stops there (ErrRenderDeadline) if Timeout does not stop it
// first.
func EvaluateContext(ctx context.Context, exprs map[string]string, varName string, vars map[string]any) (map[string]any, error) {
	if len(exprs) == 0 {
		return map[string]any{}, nil
	}
	env, err := cel.NewEnv(
		cel.Variable(varName, cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(), ext.Encoders(), ext.Lists(ext.ListsMaxRangeSize(MaxListLen)), ext.Sets(), ext.Math(),
		// After ext.Strings: replaces its join and replace (see limits.go).
		boundedStrings(),
	)
	if err != nil {
		return nil, fmt.Errorf("creating CEL environment: %w", err)
	}
	names := make([]string, 0, len(exprs))
	for n := range exprs {
		names = append(names, n)
	}
	sort.Strings(names)
	input := map[string]any{varName: toCEL(vars)}
	out := make(map[string]any, len(exprs))
	for _, name := range names {
		expr := exprs[name]
		if ctx.Err() != nil {
			err := ctxError(ctx)
			return nil, &Error{Name: name, Expression: expr, Cause: err.Error(), err: err}
		}
		ast, iss := env.Compile(expr)
		if iss != nil && iss.Err() != nil {
			return nil, &Error{Name: name, Expression: expr, Cause: iss.Err().Error()}
		}
		prg, err := env.Program(ast, programOptions()...)
		if err != nil {
			return nil, &Error{Name: name, Expression: expr, Cause: err.Error()}
		}
		val, err := eval(ctx, prg, input)
		if err != nil {
			return nil, &Error{Name: name, Expression: expr, Cause: err.Error(), err: err}
		}
		v, err := toJSON(val)
		if err != nil {
			return nil, &Error{Name: name, Expression: expr, Cause: err.Error()}
		}
		out[name] = v
	}
	return out, nil
}

// timeout is Timeout; tests shorten it.
var timeout = Timeout

// eval runs prg within the timeout and ctx. CEL reports an interruption
// as "operation interrupted"; when ctx ended it, the error says so.
func eval(ctx context.Context, prg cel.Program, input map[string]any) (ref.Val, error) {
	evalCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	val, _, err := prg.ContextEval(evalCtx, input)
	if err != nil && ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	return val, err
}

// toCEL makes JSON-decoded numbers that are whole into int64, so `x + 1`
// works on an integer import (JSON decoding yields float64 for every number
// and CEL does not mix int and double).
func toCEL(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[k] = toCEL(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = toCEL(val)
		}
		return out
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	default:
		return v
	}
}

// toJSON converts a CEL value to plain JSON-shaped Go data.
func toJSON(val ref.Val) (any, error) {
	pb, err := val.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("result %v (%s) is not JSON: %w", val, val.Type().TypeName(), err)
	}
	data, err := json.Marshal(pb)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}
