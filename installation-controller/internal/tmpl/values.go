package tmpl

import (
	"errors"
	"fmt"
	"reflect"
	"text/template"
)

// errContainsItself is set's and merge's error for a map stored in itself.
func errContainsItself(fn string) error {
	return fmt.Errorf("%s would store the dict inside itself; a value that contains itself cannot be printed", fn)
}

// boundValues replaces, in f, the functions that change a map in place (set,
// merge, mergeOverwrite and their must variants) with versions that refuse
// to make the map contain itself, which fmt and the encoders would follow
// until the stack overflows (fatal: no recover catches it, and the
// controller, rendering the same template after its restart, would crash
// again). unset only removes, and every other function builds new lists
// and maps, which nothing contains yet. measure (measure.go) detects cycles
// too, for any that would still get through. eq and ne replace
// text/template's, whose errors print non-comparable values with %v.
func boundValues(f template.FuncMap) {
	set := f["set"].(func(map[string]any, string, any) map[string]any)
	f["set"] = func(d map[string]any, key string, value any) (map[string]any, error) {
		// The only new path is d → value, so d contains itself
		// afterwards exactly if value reaches d.
		if d != nil && isContainer(reflect.ValueOf(value)) && reaches(reflect.ValueOf(value), reflect.ValueOf(d).UnsafePointer()) {
			return nil, errContainsItself("set")
		}
		return set(d, key, value), nil
	}
	type mergeFunc = func(map[string]any, ...map[string]any) (any, error)
	checked := func(name string, merge mergeFunc) mergeFunc {
		return func(dst map[string]any, srcs ...map[string]any) (any, error) {
			out, err := merge(dst, srcs...)
			if err != nil {
				return out, err
			}
			// mergo recurses into maps both sides have and stores
			// the rest by reference; whether that closed a cycle is
			// checked on the result (the render stops on the error,
			// so nothing prints the cyclic map).
			if findCycle(reflect.ValueOf(dst)) {
				return nil, errContainsItself(name)
			}
			return out, nil
		}
	}
	for _, name := range []string{"merge", "mergeOverwrite"} {
		orig := f[name].(func(map[string]any, ...map[string]any) any)
		f[name] = checked(name, func(dst map[string]any, srcs ...map[string]any) (any, error) { return orig(dst, srcs...), nil })
	}
	for _, name := range []string{"mustMerge", "mustMergeOverwrite"} {
		f[name] = checked(name, f[name].(func(map[string]any, ...map[string]any) (any, error)))
	}
	f["eq"] = eq
	f["ne"] = func(arg1, arg2 reflect.Value) (bool, error) {
		equal, err := eq(arg1, arg2)
		return !equal, err
	}
}

// The comparison of text/template's eq (text/template/funcs.go), with
// errors that name the types only.
type kind int

const (
	invalidKind kind = iota
	boolKind
	complexKind
	intKind
	floatKind
	stringKind
	uintKind
)

func basicKind(v reflect.Value) kind {
	switch v.Kind() {
	case reflect.Bool:
		return boolKind
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intKind
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintKind
	case reflect.Float32, reflect.Float64:
		return floatKind
	case reflect.Complex64, reflect.Complex128:
		return complexKind
	case reflect.String:
		return stringKind
	}
	return invalidKind
}

func indirectInterface(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Interface {
		return v
	}
	if v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

func isNil(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

var errNoComparison = errors.New("missing argument for comparison")

// eq is text/template's eq: arg1 == arg2[0] || arg1 == arg2[1] || ...
func eq(arg1 reflect.Value, arg2 ...reflect.Value) (bool, error) {
	arg1 = indirectInterface(arg1)
	if len(arg2) == 0 {
		return false, errNoComparison
	}
	k1 := basicKind(arg1)
	for _, arg := range arg2 {
		arg = indirectInterface(arg)
		k2 := basicKind(arg)
		truth := false
		if k1 != k2 {
			// Integers compare regardless of their sign's type.
			switch {
			case k1 == intKind && k2 == uintKind:
				truth = arg1.Int() >= 0 && uint64(arg1.Int()) == arg.Uint()
			case k1 == uintKind && k2 == intKind:
				truth = arg.Int() >= 0 && arg1.Uint() == uint64(arg.Int())
			default:
				if arg1.IsValid() && arg.IsValid() {
					return false, fmt.Errorf("incompatible types for comparison: %v and %v", arg1.Type(), arg.Type())
				}
			}
		} else {
			switch k1 {
			case boolKind:
				truth = arg1.Bool() == arg.Bool()
			case complexKind:
				truth = arg1.Complex() == arg.Complex()
			case floatKind:
				truth = arg1.Float() == arg.Float()
			case intKind:
				truth = arg1.Int() == arg.Int()
			case stringKind:
				truth = arg1.String() == arg.String()
			case uintKind:
				truth = arg1.Uint() == arg.Uint()
			default:
				if arg1.Kind() != arg.Kind() && arg1.IsValid() && arg.IsValid() {
					return false, fmt.Errorf("non-comparable types %v and %v", arg1.Type(), arg.Type())
				}
				if isNil(arg1) || isNil(arg) {
					truth = isNil(arg) == isNil(arg1)
				} else {
					if !arg.Type().Comparable() {
						return false, fmt.Errorf("non-comparable type %v", arg.Type())
					}
					truth = arg1.Interface() == arg.Interface()
				}
			}
		}
		if truth {
			return true, nil
		}
	}
	return false, nil
}
