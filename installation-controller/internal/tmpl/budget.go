package tmpl

import (
	"fmt"
	"reflect"
	"text/template"
)

// MaxRenderBytes is what the functions one render calls may return in all.
// The per-function limits (limits.go) bound one result, not a loop that
// keeps many: `{{ $l = append $l (repeat 1000000 "x") }}` ten thousand times,
// or a string doubled with printf thirty times, would still exhaust the
// controller's memory. Every function's result is charged against this
// budget (see guard), and the render fails once it is spent.
const MaxRenderBytes = 64 << 20

// budget is what is left of MaxRenderBytes in one render.
type budget struct{ left int64 }

var errorType = reflect.TypeFor[error]()

// charge counts v, the result of function fn, against the budget. A string
// longer than MaxStringBytes fails too: functions whose result size can be
// computed before they allocate are checked first (limits.go); the others
// (printf, toJson, b64enc, ...) grow at most a few times their arguments, so
// checking afterwards stops a doubling loop after one step.
func (b *budget) charge(fn string, v reflect.Value) error {
	n := resultSize(v)
	if (v.Kind() == reflect.String || isBytes(v)) && n > MaxStringBytes {
		return tooLong(fn, n)
	}
	b.left -= n
	if b.left < 0 {
		return fmt.Errorf("%s: the template's functions returned more than %d bytes in all; a template may not build that much", fn, MaxRenderBytes)
	}
	return nil
}

func isBytes(v reflect.Value) bool {
	return v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8
}

// resultSize is what a function allocated to return v, as far as it can be
// told from v: a string's or byte slice's length, a list's or map's own
// storage (its elements were charged when the functions that made them
// returned; values read from the template's input cost nothing), a pointer's
// or interface's target.
func resultSize(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return resultSize(v.Elem())
	case reflect.String:
		return int64(v.Len())
	case reflect.Slice, reflect.Array:
		if isBytes(v) {
			return int64(v.Len())
		}
		return int64(v.Len()) * int64(v.Type().Elem().Size())
	case reflect.Map:
		return int64(v.Len()) * int64(v.Type().Key().Size()+v.Type().Elem().Size())
	}
	return int64(v.Type().Size())
}

// builtins are text/template's own functions that build strings; the
// FuncMap's entries of these names replace them (text/template looks a name
// up there first), so they are charged like every other function.
var builtins = template.FuncMap{
	"print":    fmt.Sprint,
	"printf":   fmt.Sprintf,
	"println":  fmt.Sprintln,
	"html":     template.HTMLEscaper,
	"js":       template.JSEscaper,
	"urlquery": template.URLQueryEscaper,
}

// guardAll makes every function of f charge its result to b, so f serves
// one render at a time (b reset before each).
func guardAll(f template.FuncMap, b *budget) {
	for name, fn := range builtins {
		if _, ok := f[name]; !ok {
			f[name] = fn
		}
	}
	for name, fn := range f {
		f[name] = guard(name, fn, b)
	}
}

// guard wraps fn (any function text/template accepts: one result, or a
// result and an error) in a function of the same parameters returning
// (result, error), whose error is fn's or the budget's.
func guard(name string, fn any, b *budget) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func || t.NumOut() == 0 || t.NumOut() > 2 {
		return fn
	}
	in := make([]reflect.Type, t.NumIn())
	for i := range in {
		in[i] = t.In(i)
	}
	wrapped := reflect.FuncOf(in, []reflect.Type{t.Out(0), errorType}, t.IsVariadic())
	return reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
		var out []reflect.Value
		if t.IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if len(out) == 2 && !out[1].IsNil() {
			return out
		}
		if err := b.charge(name, out[0]); err != nil {
			return []reflect.Value{reflect.Zero(t.Out(0)), reflect.ValueOf(&err).Elem()}
		}
		return []reflect.Value{out[0], reflect.Zero(errorType)}
	}).Interface()
}
