package mapping

import (
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Limits on one data mapping. Expressions are user input evaluated inside the
// controller: without a limit an expression can spin for as long as it likes
// or allocate until the process dies of a fatal out-of-memory error, which
// no error handling catches and which would crash-loop the controller for
// every namespace.
const (
	// CostLimit is CEL's runtime cost budget per expression (about one
	// unit per operation or per element/byte handled); the same per-call
	// limit as Kubernetes' CEL validation rules.
	CostLimit = 1_000_000
	// MaxListLen is the longest list lists.range may build.
	MaxListLen = 10_000
	// MaxStringBytes is the longest string join and replace may build:
	// both can multiply their input size (a long separator between many
	// elements, a long replacement for many matches) before CEL's cost
	// tracking, which runs after a call, sees the result.
	MaxStringBytes = 1 << 20
	// Timeout is a backstop for anything the cost model underestimates:
	// evaluation is interrupted (checked every interruptEvery
	// comprehension iterations) once it has run this long.
	Timeout = 5 * time.Second
	// interruptEvery is how many comprehension iterations run between
	// checks for the timeout.
	interruptEvery = 100
)

// boundedStrings redefines ext.Strings' join and replace overloads (same
// IDs and signatures, which CEL allows) with versions that check the result
// size before building it.
func boundedStrings() cel.EnvOption {
	join := func(list ref.Val, sep string) ref.Val {
		l, ok := list.(traits.Lister)
		if !ok {
			return types.NewErr("join: invalid input: %v", list)
		}
		sz := int(l.Size().(types.Int))
		parts := make([]string, 0, sz)
		n := 0
		for i := range sz {
			s, ok := l.Get(types.Int(i)).(types.String)
			if !ok {
				return types.NewErr("join: invalid input: %v", l.Get(types.Int(i)))
			}
			n += len(s) + len(sep)
			if n > MaxStringBytes+len(sep) {
				return types.NewErr("join would return more than %d bytes, the limit", MaxStringBytes)
			}
			parts = append(parts, string(s))
		}
		return types.String(strings.Join(parts, sep))
	}
	replace := func(str, old, repl string, limit int) ref.Val {
		n := strings.Count(str, old)
		if limit >= 0 && limit < n {
			n = limit
		}
		// n <= len(str)+1, so the product cannot overflow an int64.
		if size := int64(len(str)) + int64(n)*int64(len(repl)-len(old)); size > MaxStringBytes && len(repl) > len(old) {
			return types.NewErr("replace would return %d bytes, more than the limit of %d", size, MaxStringBytes)
		}
		return types.String(strings.Replace(str, old, repl, limit))
	}
	return cel.Lib(boundedLib{join: join, replace: replace})
}

type boundedLib struct {
	join    func(list ref.Val, sep string) ref.Val
	replace func(str, old, repl string, limit int) ref.Val
}

func (b boundedLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("join",
			cel.MemberOverload("list_join", []*cel.Type{cel.ListType(cel.StringType)}, cel.StringType,
				cel.UnaryBinding(func(list ref.Val) ref.Val { return b.join(list, "") })),
			cel.MemberOverload("list_join_string", []*cel.Type{cel.ListType(cel.StringType), cel.StringType}, cel.StringType,
				cel.BinaryBinding(func(list, sep ref.Val) ref.Val { return b.join(list, string(sep.(types.String))) }))),
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{cel.StringType, cel.StringType, cel.StringType}, cel.StringType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return b.replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), -1)
				})),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.StringType, cel.IntType}, cel.StringType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return b.replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), int(args[3].(types.Int)))
				}))),
	}
}

func (boundedLib) ProgramOptions() []cel.ProgramOption { return nil }

// programOptions limit evaluation: a cost budget (CEL checks it after each
// step, comprehension iterations included) and interrupt checks inside
// comprehensions so the Timeout can stop a long loop.
func programOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery)}
}

// Limits on the Spiff expressions of a mapping, checked when it is parsed.
const (
	// MaxExpressionBytes is the longest expression between `((` and `))`.
	MaxExpressionBytes = 8 << 10
	// MaxDepth is the deepest nesting of a mapping value (maps and lists)
	// and of one expression (parentheses, list and map literals).
	MaxDepth = 64
)
