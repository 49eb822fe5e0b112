package tmpl

import (
	"encoding/json"
	"reflect"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// text/template calls the methods of any value a template holds: `(now).Format
// $s`, `$t.AddDate`, `(semver "1.0.0").SetMetadata $s`. Those calls are no
// functions of the FuncMap, so guard (budget.go) never sees them: neither
// their result is charged nor the deadline checked (a 1 MB layout formatted
// in a range of 300 kept 375 MB). The only values with methods that sprig's
// functions return are time.Time (now, toDate, dateModify, ...) and
// *semver.Version (semver); the functions below return stand-ins for them
// instead, whose only methods are bounded ones: those that print them (so
// that {{ now }}, toString, toJson and toYaml print them exactly as before)
// and, for versions, the getters sprig documents. The functions that take a
// time get the time.Time back. Values from the template's input are decoded
// JSON (maps, lists, scalars): they have no methods.

// renderTime is a time.Time without its methods, but for printing.
type renderTime time.Time

func (t renderTime) String() string               { return time.Time(t).String() }
func (t renderTime) GoString() string             { return time.Time(t).GoString() }
func (t renderTime) MarshalJSON() ([]byte, error) { return time.Time(t).MarshalJSON() }

// semverVersion is the part of *semver.Version that renderVersion offers.
type semverVersion interface {
	Major() uint64
	Minor() uint64
	Patch() uint64
	Prerelease() string
	Metadata() string
	Original() string
	String() string
}

// renderVersion is a *semver.Version with its getters only (not
// SetMetadata, SetPrerelease, which build strings as long as their
// arguments, nor the Unmarshal and Scan methods, which change it).
type renderVersion struct{ v semverVersion }

func (v renderVersion) Major() uint64      { return v.v.Major() }
func (v renderVersion) Minor() uint64      { return v.v.Minor() }
func (v renderVersion) Patch() uint64      { return v.v.Patch() }
func (v renderVersion) Prerelease() string { return v.v.Prerelease() }
func (v renderVersion) Metadata() string   { return v.v.Metadata() }
func (v renderVersion) Original() string   { return v.v.Original() }
func (v renderVersion) String() string     { return v.v.String() }

// MarshalJSON is the version's: a quoted string.
func (v renderVersion) MarshalJSON() ([]byte, error) { return json.Marshal(v.v.String()) }

// standIns are the types whose values functions return instead of those
// with methods (TestFunctionsReturnNoMethods keeps it so).
var standIns = map[reflect.Type]bool{
	reflect.TypeFor[renderTime]():    true,
	reflect.TypeFor[renderVersion](): true,
}

// realTime gives the functions taking a time any value the template passes
// as it was before the stand-in: a renderTime as the time.Time it is.
func realTime(v any) any {
	if t, ok := v.(renderTime); ok {
		return time.Time(t)
	}
	return v
}

// boundMethods replaces, in f, the functions that return or take times and
// versions with ones that return the stand-ins and take them.
func boundMethods(f template.FuncMap) {
	orig := sprig.TxtFuncMap()
	f["now"] = func() renderTime { return renderTime(time.Now()) }
	toDate := orig["toDate"].(func(string, string) time.Time)
	f["toDate"] = func(layout, value string) renderTime { return renderTime(toDate(layout, value)) }
	mustToDate := orig["mustToDate"].(func(string, string) (time.Time, error))
	f["mustToDate"] = func(layout, value string) (renderTime, error) {
		t, err := mustToDate(layout, value)
		return renderTime(t), err
	}
	dateModify := orig["dateModify"].(func(string, time.Time) time.Time)
	for _, name := range []string{"dateModify", "date_modify"} {
		f[name] = func(d string, t renderTime) renderTime { return renderTime(dateModify(d, time.Time(t))) }
	}
	mustDateModify := orig["mustDateModify"].(func(string, time.Time) (time.Time, error))
	for _, name := range []string{"mustDateModify", "must_date_modify"} {
		f[name] = func(d string, t renderTime) (renderTime, error) {
			m, err := mustDateModify(d, time.Time(t))
			return renderTime(m), err
		}
	}
	unixEpoch := orig["unixEpoch"].(func(time.Time) string)
	f["unixEpoch"] = func(t renderTime) string { return unixEpoch(time.Time(t)) }

	// Those taking any value (a time, a number, ...): a stand-in is
	// the time.Time it was, and typeOf and friends name its type as
	// before.
	date := orig["date"].(func(string, any) string)
	f["date"] = func(layout string, t any) string { return date(layout, realTime(t)) }
	dateInZone := orig["dateInZone"].(func(string, any, string) string)
	for _, name := range []string{"dateInZone", "date_in_zone"} {
		f[name] = func(layout string, t any, zone string) string { return dateInZone(layout, realTime(t), zone) }
	}
	for _, name := range []string{"htmlDate", "ago", "durationRound", "typeOf", "kindOf"} {
		fn := orig[name].(func(any) string)
		f[name] = func(v any) string { return fn(realTime(v)) }
	}
	htmlDateInZone := orig["htmlDateInZone"].(func(any, string) string)
	f["htmlDateInZone"] = func(t any, zone string) string { return htmlDateInZone(realTime(t), zone) }
	for _, name := range []string{"typeIs", "typeIsLike", "kindIs"} {
		fn := orig[name].(func(string, any) bool)
		f[name] = func(target string, v any) bool { return fn(target, realTime(v)) }
	}

	// copystructure copies a struct field by field, and the stand-ins'
	// fields are unexported: it would make them zero (time.Time has a
	// copier of its own there). They never change, so copies share them.
	deepCopy := orig["deepCopy"].(func(any) any)
	f["deepCopy"] = func(v any) any {
		if standIns[reflect.TypeOf(v)] {
			return v
		}
		c := deepCopy(v)
		keepStandIns(reflect.ValueOf(v), reflect.ValueOf(c))
		return c
	}
	mustDeepCopy := orig["mustDeepCopy"].(func(any) (any, error))
	f["mustDeepCopy"] = func(v any) (any, error) {
		if standIns[reflect.TypeOf(v)] {
			return v, nil
		}
		c, err := mustDeepCopy(v)
		if err == nil {
			keepStandIns(reflect.ValueOf(v), reflect.ValueOf(c))
		}
		return c, err
	}

	semver := reflect.ValueOf(orig["semver"])
	f["semver"] = func(version string) (renderVersion, error) {
		out := semver.Call([]reflect.Value{reflect.ValueOf(version)})
		if err, _ := out[1].Interface().(error); err != nil {
			return renderVersion{}, err
		}
		return renderVersion{v: out[0].Interface().(semverVersion)}, nil
	}
}

func isStandIn(v reflect.Value) bool {
	v = indirectInterface(v)
	return v.IsValid() && standIns[v.Type()]
}

// keepStandIns puts the stand-ins orig holds into c, its copy, at the same
// places. orig was measured (checkCopied): it holds no cycle and nests at
// most maxDepth levels.
func keepStandIns(orig, c reflect.Value) {
	orig, c = indirectInterface(orig), indirectInterface(c)
	if !orig.IsValid() || !c.IsValid() || orig.Type() != c.Type() {
		return
	}
	switch orig.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range min(orig.Len(), c.Len()) {
			if o, e := orig.Index(i), c.Index(i); isStandIn(o) && e.CanSet() {
				e.Set(o)
			} else {
				keepStandIns(o, e)
			}
		}
	case reflect.Map:
		it := orig.MapRange()
		for it.Next() {
			e := c.MapIndex(it.Key())
			if !e.IsValid() {
				continue
			}
			if isStandIn(it.Value()) {
				c.SetMapIndex(it.Key(), it.Value())
			} else {
				keepStandIns(it.Value(), e)
			}
		}
	case reflect.Pointer:
		if !orig.IsNil() && !c.IsNil() {
			keepStandIns(orig.Elem(), c.Elem())
		}
	case reflect.Struct:
		for i := range orig.NumField() {
			if !orig.Type().Field(i).IsExported() {
				continue
			}
			if o, e := orig.Field(i), c.Field(i); isStandIn(o) && e.CanSet() {
				e.Set(o)
			} else {
				keepStandIns(o, e)
			}
		}
	}
}
