package mapping

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// undefinedError is a reference to a value that does not exist; `||`
// falls back to its right side on it.
type undefinedError struct {
	pos  int
	what string
}

func (e *undefinedError) Error() string { return fmt.Sprintf("at offset %d: %s", e.pos, e.what) }

// spiffEval evaluates parsed expressions over vars; kind names what vars
// holds ("import" or "export") in errors.
type spiffEval struct {
	ctx  context.Context
	vars map[string]any
	kind string
}

func (s *spiffEval) eval(e expr) (any, error) {
	if s.ctx.Err() != nil {
		return nil, ctxError(s.ctx)
	}
	switch e := e.(type) {
	case *literalExpr:
		return e.val, nil
	case *refExpr:
		return s.ref(e)
	case *listExpr:
		return s.list(e)
	case *mapExpr:
		return s.mapLit(e)
	case *unaryExpr:
		b, err := s.boolOf(e.x, "!")
		if err != nil {
			return nil, err
		}
		return !b, nil
	case *condExpr:
		b, err := s.boolOf(e.cond, "?:")
		if err != nil {
			return nil, err
		}
		if b {
			return s.eval(e.then)
		}
		return s.eval(e.else_)
	case *concatExpr:
		return s.concat(e)
	case *binaryExpr:
		return s.binary(e)
	}
	return nil, errAt(e.position(), "unsupported expression")
}

func (s *spiffEval) ref(e *refExpr) (any, error) {
	cur, ok := s.vars[e.name]
	if !ok {
		return nil, &undefinedError{pos: e.pos, what: fmt.Sprintf("%s %q is not defined", s.kind, e.name)}
	}
	path := e.name
	for _, step := range e.steps {
		switch step := step.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, errAt(e.pos, "%s is %s, not a map: it has no field %q", path, typeName(cur), step)
			}
			if cur, ok = m[step]; !ok {
				return nil, &undefinedError{pos: e.pos, what: fmt.Sprintf("%s has no field %q", path, step)}
			}
			path += "." + step
		case int:
			l, ok := cur.([]any)
			if !ok {
				return nil, errAt(e.pos, "%s is %s, not a list: it cannot be indexed", path, typeName(cur))
			}
			if step >= len(l) {
				return nil, &undefinedError{pos: e.pos, what: fmt.Sprintf("%s has %d elements, no index %d", path, len(l), step)}
			}
			cur = l[step]
			path += fmt.Sprintf(".[%d]", step)
		}
	}
	return cur, nil
}

func (s *spiffEval) list(e *listExpr) (any, error) {
	if len(e.elems) > MaxListLen {
		return nil, errAt(e.pos, "a list of %d elements, more than the limit of %d", len(e.elems), MaxListLen)
	}
	out := make([]any, 0, len(e.elems))
	for _, el := range e.elems {
		v, err := s.eval(el)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *spiffEval) mapLit(e *mapExpr) (any, error) {
	out := make(map[string]any, len(e.keys))
	for i, k := range e.keys {
		kv, err := s.eval(k)
		if err != nil {
			return nil, err
		}
		key, ok := kv.(string)
		if !ok {
			return nil, errAt(k.position(), "a map key must be a string, not %s", typeName(kv))
		}
		if out[key], err = s.eval(e.vals[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *spiffEval) boolOf(e expr, op string) (bool, error) {
	v, err := s.eval(e)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, errAt(e.position(), "%s needs a boolean, not %s", op, typeName(v))
	}
	return b, nil
}

// concat joins juxtaposed operands: lists into one list, anything else
// (strings, numbers, booleans) into one string.
func (s *spiffEval) concat(e *concatExpr) (any, error) {
	vals := make([]any, len(e.parts))
	lists := 0
	for i, p := range e.parts {
		v, err := s.eval(p)
		if err != nil {
			return nil, err
		}
		if _, ok := v.([]any); ok {
			lists++
		}
		vals[i] = v
	}
	if lists == len(vals) {
		var out []any
		for _, v := range vals {
			if len(out)+len(v.([]any)) > MaxListLen {
				return nil, errAt(e.pos, "the concatenated list has more than %d elements, the limit", MaxListLen)
			}
			out = append(out, v.([]any)...)
		}
		return out, nil
	}
	var b strings.Builder
	for i, v := range vals {
		str, ok := scalarString(v)
		if !ok {
			return nil, errAt(e.parts[i].position(), "cannot concatenate %s with a string", typeName(v))
		}
		if b.Len()+len(str) > MaxStringBytes {
			return nil, errAt(e.pos, "the concatenated string has more than %d bytes, the limit", MaxStringBytes)
		}
		b.WriteString(str)
	}
	return b.String(), nil
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func (s *spiffEval) binary(e *binaryExpr) (any, error) {
	switch e.op {
	case "||":
		l, err := s.eval(e.l)
		var undef *undefinedError
		if errors.As(err, &undef) || (err == nil && l == nil) {
			return s.eval(e.r)
		}
		return l, err
	case "-and", "-or":
		l, err := s.boolOf(e.l, e.op)
		if err != nil || l == (e.op == "-or") {
			return l, err
		}
		return s.boolOf(e.r, e.op)
	}
	l, err := s.eval(e.l)
	if err != nil {
		return nil, err
	}
	r, err := s.eval(e.r)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "<", "<=", ">", ">=":
		return compare(e, l, r)
	}
	return arithmetic(e, l, r)
}

// equal compares numbers by value (1 == 1.0) and anything else deeply.
func equal(l, r any) bool {
	if isNumber(l) && isNumber(r) {
		return toFloat(l) == toFloat(r)
	}
	return reflect.DeepEqual(l, r)
}

func compare(e *binaryExpr, l, r any) (any, error) {
	var c int
	switch {
	case isNumber(l) && isNumber(r):
		a, b := toFloat(l), toFloat(r)
		c = map[bool]int{true: -1, false: 0}[a < b] + map[bool]int{true: 1, false: 0}[a > b]
	default:
		a, okA := l.(string)
		b, okB := r.(string)
		if !okA || !okB {
			return nil, errAt(e.pos, "%s compares numbers or strings, not %s and %s", e.op, typeName(l), typeName(r))
		}
		c = strings.Compare(a, b)
	}
	return map[string]bool{"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[e.op], nil
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func toFloat(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

func arithmetic(e *binaryExpr, l, r any) (any, error) {
	if !isNumber(l) || !isNumber(r) {
		hint := ""
		if e.op == "+" {
			hint = ` (strings are joined by juxtaposition: (( a "-" b )))`
		}
		return nil, errAt(e.pos, "%s needs numbers, not %s and %s%s", e.op, typeName(l), typeName(r), hint)
	}
	a, aInt := l.(int64)
	b, bInt := r.(int64)
	if aInt && bInt {
		return intArithmetic(e, a, b)
	}
	if e.op == "%" {
		return nil, errAt(e.pos, "%% needs integers")
	}
	x, y := toFloat(l), toFloat(r)
	switch e.op {
	case "+":
		return x + y, nil
	case "-":
		return x - y, nil
	case "*":
		return x * y, nil
	}
	if y == 0 {
		return nil, errAt(e.pos, "division by zero")
	}
	return x / y, nil
}

func intArithmetic(e *binaryExpr, a, b int64) (any, error) {
	var out int64
	overflow := false
	switch e.op {
	case "+":
		out = a + b
		overflow = (b > 0 && out < a) || (b < 0 && out > a)
	case "-":
		out = a - b
		overflow = (b < 0 && out < a) || (b > 0 && out > a)
	case "*":
		out = a * b
		overflow = a != 0 && (out/a != b || (a == -1 && b == math.MinInt64))
	case "/", "%":
		if b == 0 {
			return nil, errAt(e.pos, "division by zero")
		}
		if a == math.MinInt64 && b == -1 {
			overflow = true
		} else if e.op == "/" {
			out = a / b
		} else {
			out = a % b
		}
	}
	if overflow {
		return nil, errAt(e.pos, "integer overflow in %d %s %d", a, e.op, b)
	}
	return out, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}
