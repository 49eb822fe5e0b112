package mapping

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"
)

// celEval evaluates CEL mappings; its environment is built on first use.
type celEval struct {
	varName string
	input   map[string]any
	env     *cel.Env
}

func (c *celEval) eval(ctx context.Context, src string) (any, error) {
	if c.env == nil {
		env, err := cel.NewEnv(
			cel.Variable(c.varName, cel.MapType(cel.StringType, cel.DynType)),
			ext.Strings(), ext.Encoders(), ext.Lists(ext.ListsMaxRangeSize(MaxListLen)), ext.Sets(), ext.Math(),
			// After ext.Strings: replaces its join and replace (see limits.go).
			boundedStrings(),
		)
		if err != nil {
			return nil, fmt.Errorf("creating CEL environment: %w", err)
		}
		c.env = env
	}
	ast, iss := c.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := c.env.Program(ast, programOptions()...)
	if err != nil {
		return nil, err
	}
	val, err := eval(ctx, prg, c.input)
	if err != nil {
		return nil, err
	}
	return toJSON(val)
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
