package tmpl

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// The budget (budget.go) charges a list or map only its own slots, because
// its elements were charged when the functions that made them returned. But
// values are shared by reference: `$s := repeat 100000 "x"` put ten times in
// a list, that list ten times in another, and so on, costs a few hundred
// bytes per level while the value, written out, doubles its size tenfold per
// level. Printing or encoding such a value (fmt, toJson, toYaml, ...) builds
// the whole text before any limit sees it: three levels took 0.4–1.7 GiB,
// four would take tens. And a map stored in itself (`set $d "a" $d`) makes
// fmt and the encoders recurse until the goroutine's stack overflows, a fatal
// error no recover catches. So every function that walks a whole value, and
// every value a template prints, is measured first (measure): its size as
// written out, stopping as soon as a limit is passed, and refused if it
// contains itself or nests deeper than maxDepth.

// maxDepth is how deeply a value that is printed, encoded, copied or compared
// may nest. fmt, encoding/json, copystructure and reflect.DeepEqual recurse
// once per level; a list nested a million times (cheap to build in a loop)
// would need a stack of a gigabyte, beyond Go's limit, and overflowing it is
// fatal. Real documents nest a few dozen levels.
const maxDepth = 1000

// unlimited is a measure limit that is never reached.
const unlimited = int64(1) << 62

// size is what measure found: out is a lower bound of the value's length
// written out by fmt's %v, encoding/json or YAML (every string's bytes, at
// least one byte per other scalar, per separator and per bracket), mem an
// estimate of the memory a deep copy of it takes (its strings and every
// element's slot). nodes counts the scalars, lists, maps and map keys walked,
// and escaped the bytes of strings that JSON escapes (counted only when the
// measurer's escapes is set, for toYaml's allowance, yaml.go).
type size struct{ out, mem, nodes, escaped int64 }

// errTooLarge reports that a measured value passed the limit given.
var errTooLarge = errors.New("value too large")

// errCycle and errTooDeep say why a value cannot be printed at all.
var (
	errCycle   = errors.New("the value contains itself (a map or list was stored inside itself)")
	errTooDeep = fmt.Errorf("the value is nested more than %d levels deep", maxDepth)
)

// measurer walks a value, counting its size, until out passes maxOut or mem
// passes maxMem.
type measurer struct {
	maxOut, maxMem int64
	escapes        bool
	n              size
}

// measure returns the size of v, or errTooLarge once it passes maxOut or
// maxMem, or errCycle/errTooDeep. Every element adds at least one byte to out
// and 16 to mem (but an empty string), so the walk ends after at most about max(maxOut, maxMem/16)
// elements, whatever shared references make the value look like written
// out. A value that contains itself never ends, so it passes a limit (or
// maxDepth) too; only then, on that rare path, is it looked at for cycles
// (findCycle), to say so.
func measure(v reflect.Value, maxOut, maxMem int64) (size, error) {
	m := measurer{maxOut: maxOut, maxMem: maxMem}
	return m.measure(v)
}

// measure adds v's size to what m counted before (see the function measure).
func (m *measurer) measure(v reflect.Value) (size, error) {
	if m.walk(v, 0) {
		return m.n, nil
	}
	if findCycle(v) {
		return m.n, errCycle
	}
	if m.n.out <= m.maxOut && m.n.mem <= m.maxMem {
		return m.n, errTooDeep
	}
	return m.n, errTooLarge
}

func (m *measurer) add(out, mem int64) bool {
	m.n.out += out
	m.n.mem += mem
	return m.n.out <= m.maxOut && m.n.mem <= m.maxMem
}

// walk adds v's size; false once over a limit or maxDepth.
func (m *measurer) walk(v reflect.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	if k := v.Kind(); (k != reflect.Interface && k != reflect.Pointer) || v.IsNil() {
		m.n.nodes++
	}
	switch v.Kind() {
	case reflect.Invalid:
		return m.add(1, 0)
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return m.add(1, 0)
		}
		if v.Kind() == reflect.Pointer {
			depth++
		}
		// An interface is no level of its own ([]any's elements are
		// interfaces); its dynamic value is never an interface again.
		return m.walk(v.Elem(), depth)
	case reflect.String:
		if m.escapes {
			m.n.escaped += jsonEscaped(v.String())
		}
		return m.add(int64(v.Len()), int64(v.Len()))
	case reflect.Slice, reflect.Array:
		if isBytes(v) {
			return m.add(int64(v.Len()), int64(v.Len()))
		}
		n := v.Len()
		if !m.add(2+int64(max(n-1, 0)), int64(n)*int64(max(v.Type().Elem().Size(), 16))) {
			return false
		}
		for i := range n {
			if !m.walk(v.Index(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		n := v.Len()
		// "map[" "]" / "{" "}", a separator between entries and one
		// between each key and value; 48 bytes an entry is about what a
		// Go map takes for a string key and an interface value.
		if !m.add(2+int64(max(n-1, 0))+int64(n), int64(n)*48) {
			return false
		}
		it := v.MapRange()
		for it.Next() {
			if !m.walk(it.Key(), depth+1) || !m.walk(it.Value(), depth+1) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if !m.add(2, int64(v.Type().Size())) {
			return false
		}
		for i := range v.NumField() {
			if !m.walk(v.Field(i), depth+1) {
				return false
			}
		}
		return true
	}
	return m.add(1, int64(v.Type().Size()))
}

// jsonEscaped counts the bytes of s that encoding/json writes escaped
// (control characters, quotes, backslashes, and <, > and & as \u003c ...),
// and those of U+2028 and U+2029 (escaped too).
func jsonEscaped(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\', c == '<', c == '>', c == '&':
			n++
		case c == 0xe2 && strings.HasPrefix(s[i:], "\u2028"), c == 0xe2 && strings.HasPrefix(s[i:], "\u2029"):
			n += 3
		}
	}
	return n
}

// ref identifies a map, slice or pointer target for findCycle and reaches.
type ref struct {
	p unsafe.Pointer
	n int
	t reflect.Type
}

// refOf is v's identity if v can hold (or be) a value that contains it.
func refOf(v reflect.Value) (ref, bool) {
	switch v.Kind() {
	case reflect.Map, reflect.Pointer:
		if v.IsNil() {
			return ref{}, false
		}
		return ref{p: v.UnsafePointer(), t: v.Type()}, true
	case reflect.Slice:
		if v.Len() == 0 || isBytes(v) {
			return ref{}, false
		}
		return ref{p: v.UnsafePointer(), n: v.Len(), t: v.Type()}, true
	}
	return ref{}, false
}

// visit calls f on the values v holds directly (elements, map keys and
// values, fields, an interface's or pointer's target), until f returns false.
func visit(v reflect.Value, f func(reflect.Value) bool) bool {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			return f(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		if isBytes(v) {
			return true
		}
		for i := range v.Len() {
			if !f(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if !f(it.Key()) || !f(it.Value()) {
				return false
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if !f(v.Field(i)) {
				return false
			}
		}
	}
	return true
}

// findCycle reports whether v contains itself: a depth-first search that
// visits every map, slice and pointer once (so shared references cost
// nothing), with those on the current path marked. It is the slow path of
// measure and the check after merge; a search deeper than maxDepth stops
// (measure then reports the depth).
func findCycle(v reflect.Value) bool {
	onPath := map[ref]bool{}
	done := map[ref]bool{}
	var dfs func(v reflect.Value, depth int) bool // true: cycle found
	dfs = func(v reflect.Value, depth int) bool {
		if depth > maxDepth {
			return false
		}
		r, ok := refOf(v)
		if ok {
			if onPath[r] {
				return true
			}
			if done[r] {
				return false
			}
			onPath[r] = true
		}
		found := false
		visit(v, func(e reflect.Value) bool {
			found = dfs(e, depth+level(v))
			return !found
		})
		if ok {
			delete(onPath, r)
			done[r] = true
		}
		return found
	}
	return dfs(v, 0)
}

// reaches reports whether target (a map) can be reached from v: storing v in
// target would then make target contain itself. Each map, slice and pointer
// is visited once.
func reaches(v reflect.Value, target unsafe.Pointer) bool {
	done := map[ref]bool{}
	var dfs func(v reflect.Value, depth int) bool
	dfs = func(v reflect.Value, depth int) bool {
		if depth > maxDepth {
			// Deeper than anything measure lets through: whatever
			// prints, encodes, copies or compares the value refuses
			// it, so a cycle beyond this depth could do no harm.
			return false
		}
		r, ok := refOf(v)
		if ok {
			if v.Kind() == reflect.Map && r.p == target {
				return true
			}
			if done[r] {
				return false
			}
			done[r] = true
		}
		found := false
		visit(v, func(e reflect.Value) bool {
			found = dfs(e, depth+level(v))
			return !found
		})
		return found
	}
	return dfs(v, 0)
}

// isContainer reports whether v (through interfaces) is a map, list or
// pointer, the only values that can contain a map.
func isContainer(v reflect.Value) bool {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Map, reflect.Pointer, reflect.Slice, reflect.Array, reflect.Struct:
		return true
	}
	return false
}

// level is how much v adds to the depth of what it holds: an interface
// nothing (as in measurer.walk).
func level(v reflect.Value) int {
	if v.Kind() == reflect.Interface {
		return 0
	}
	return 1
}
