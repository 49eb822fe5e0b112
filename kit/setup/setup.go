// Package setup holds the check every Terrace reconciler's SetupWithManager
// makes before it registers anything: that the inputs it was built with are
// there. A reconciler missing its client or recorder would otherwise start
// and then fail (or panic) on its first reconcile, far from the mistake; the
// check refuses it at start-up and names every missing input at once.
package setup

import (
	"errors"
	"fmt"
	"reflect"
)

// Input is one input a reconciler needs: the name of its field and its value.
type Input struct {
	Name  string
	Value any
}

// Required names an input that must be set.
func Required(name string, value any) Input { return Input{Name: name, Value: value} }

// Check returns one error naming every input of component that is missing:
// nil (also a nil pointer, map, slice or func held in an interface) or an
// empty string. It returns nil when all are set.
func Check(component string, inputs ...Input) error {
	var errs []error
	for _, in := range inputs {
		if what := missing(in.Value); what != "" {
			errs = append(errs, fmt.Errorf("%s: %s is %s", component, in.Name, what))
		}
	}
	return errors.Join(errs...)
}

func missing(v any) string {
	if v == nil {
		return "nil"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		if rv.IsNil() {
			return "nil"
		}
	case reflect.String:
		if rv.Len() == 0 {
			return "empty"
		}
	}
	return ""
}
