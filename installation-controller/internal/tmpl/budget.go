package tmpl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"text/template"
	"time"
)

// MaxRenderBytes is what the functions one render calls may return in all.
// The per-function limits (limits.go) bound one result, not a loop that
// keeps many: `{{ $l = append $l (repeat 1000000 "x") }}` ten thousand times,
// or a string doubled with printf thirty times, would still exhaust the
// controller's memory. Every function's result is charged against this
// budget (see guard), and the render fails once it is spent.
const MaxRenderBytes = 64 << 20

// MaxDocumentDecodeBytes is what decoding one rendered document may be
// estimated to allocate (yaml.go's factors, which are the most seen and
// about twice what a document of plain manifests takes): twice a render's
// budget, so that a document of about 1.5 MB of ordinary manifests, the
// most an Execution can hold in etcd, still decodes (1 MB of ConfigMaps is
// estimated at 85 MB and took 45 MB), while text made of nodes alone
// (`0,0,...`) is refused long before that size.
const MaxDocumentDecodeBytes = 2 * MaxRenderBytes

// budget is what one render may still use: bytes of limit (MaxRenderBytes,
// then MaxDocumentDecodeBytes), steps of MaxSteps, time until its deadline,
// and the output writer (whose room bounds what a value printed may be); the
// levels the template calls under way nest (depth, see MaxNesting); and what
// it reserved of the process-wide budget (process.go).
type budget struct {
	limit    int64
	left     int64
	held     int64
	steps    int64
	depth    int64
	deadline time.Time
	out      *limitedWriter
	// outputBytes is what the output buffer takes, reserved, not charged.
	outputBytes int64
	reserved    int64
	// ctx is the reconcile's: done is its Done, and byCtx says the
	// deadline is ctx's, not Timeout's (deadline.go).
	ctx   context.Context
	done  <-chan struct{}
	byCtx bool
}

// reset gives b the whole budget of a new render writing to out, within
// ctx.
func (b *budget) reset(ctx context.Context, out *limitedWriter) {
	b.limit = MaxRenderBytes
	b.left = MaxRenderBytes
	b.held = 0
	b.steps = maxSteps
	b.depth = 0
	b.outputBytes = 0
	b.reserved = 0
	b.setDeadline(ctx)
	b.out = out
	if out != nil {
		out.wrote = b.wrote
	}
}

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
	return b.backed(fn)
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

// decoders build their results whole from a string (encoding/json's and
// YAML's decoders): nothing in them was charged before, and what they hold
// takes many times what resultSize sees at their top level (a list of 100 000
// one-key maps, from an 800 KB string, takes 35 MB; resultSize saw 1.6 MB,
// and eight such decodes kept 295 MB). They are charged decodedSize.
var decoders = map[string]bool{"fromJson": true, "mustFromJson": true, "fromYaml": true}

// What decoded values take in memory (Go 1.26, measured with decoded lists
// of 100 000 maps, lists, numbers and strings, and a map of 80 000 keys:
// decodedSize is within 10% of the heap they kept, or above it).
const (
	// sliceBytes is a list's header, boxed in an interface.
	sliceBytes = 24
	// elemBytes is a list element's slot with the slack append leaves.
	elemBytes = 24
	// smallMapBytes is a map of one to eight entries: its header and one
	// group of eight slots; an empty one is its header, mapBytes.
	smallMapBytes = 320
	mapBytes      = 48
	// entryBytes is an entry of a larger map: its slots at the load
	// Go's maps keep, and their directory.
	entryBytes = 64
	// boxBytes is a string's header or a number boxed in an interface.
	boxBytes = 16
)

// decodedSize estimates the memory v, a decoder's result (maps of string
// keys, lists, strings, float64, bool, nil), takes, counting until it passes
// limit. encoding/json refuses input nested more than 10 000 levels (YAML is
// converted through it), which bounds the recursion.
func decodedSize(v reflect.Value, limit int64) int64 {
	var n int64
	var walk func(v reflect.Value) bool
	walk = func(v reflect.Value) bool {
		switch v.Kind() {
		case reflect.Interface:
			return v.IsNil() || walk(v.Elem())
		case reflect.String:
			n += boxBytes + roundUp8(v.Len())
		case reflect.Slice:
			n += sliceBytes + sat(int64(v.Len()), elemBytes)
			for i := 0; i < v.Len() && n <= limit; i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			switch l := int64(v.Len()); {
			case l == 0:
				n += mapBytes
			case l <= 8:
				n += smallMapBytes
			default:
				n += mapBytes + sat(l, entryBytes)
			}
			it := v.MapRange()
			for it.Next() && n <= limit {
				// The key's bytes; its header is in the slot.
				n += roundUp8(it.Key().Len())
				walk(it.Value())
			}
		case reflect.Bool, reflect.Invalid:
			// Booleans and nil are no allocations of their own.
		default:
			n += int64(v.Type().Size())
		}
		return n <= limit
	}
	walk(v)
	return n
}

func roundUp8(n int) int64 { return (int64(n) + 7) &^ 7 }

// chargeDecoded charges v, the result of decoder fn, its decodedSize.
func (b *budget) chargeDecoded(fn string, v reflect.Value) error {
	b.left -= decodedSize(v, max(b.left, 0))
	if b.left < 0 {
		return fmt.Errorf("%s: the template's functions returned more than %d bytes in all; a template may not build that much", fn, MaxRenderBytes)
	}
	return b.backed(fn)
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
	check := argChecks[name]
	fail := func(err error) []reflect.Value {
		return []reflect.Value{reflect.Zero(t.Out(0)), reflect.ValueOf(&err).Elem()}
	}
	return reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
		// Between two steps (steps.go) a template runs only the calls
		// it spells out, but one call can take long (sha256sum of a
		// long string): the deadline is checked before each.
		if err := b.checkTime(); err != nil {
			return fail(err)
		}
		if check != nil {
			// What a check held for the call's own allocations
			// (yaml.go) is given back when it returned, before its
			// result is charged (and if it panics).
			defer b.release()
			if err := check(b, name, args); err != nil {
				return fail(err)
			}
		}
		var out []reflect.Value
		if t.IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		b.release()
		if len(out) == 2 && !out[1].IsNil() {
			return out
		}
		switch {
		case decoders[name]:
			if err := b.chargeDecoded(name, out[0]); err != nil {
				return fail(err)
			}
		default:
			if err := b.charge(name, out[0]); err != nil {
				return fail(err)
			}
		}
		return []reflect.Value{out[0], reflect.Zero(errorType)}
	}).Interface()
}

// argCheck checks a function's arguments (as text/template passes them: a
// variadic function's last argument is the slice of the rest) before the
// function runs.
type argCheck func(b *budget, name string, args []reflect.Value) error

// The functions that walk whole values, and how their arguments are checked
// (measure.go). Every other function with a list, map or interface parameter
// looks only at the top level of its arguments or stores them by reference
// (shallowFuncs, kept complete by TestEveryFunctionIsClassified).
var argChecks = map[string]argCheck{}

// printing functions write their arguments out whole (fmt's %v, JSON, YAML):
// arguments that would take more than MaxStringBytes written out are
// refused before the text is built (the result would be refused anyway).
var printingFuncs = []string{
	"toJson", "toPrettyJson", "toRawJson", "mustToJson", "mustToPrettyJson", "mustToRawJson", "toYaml",
	"toString", "toStrings", "sortAlpha", "join", "cat", "quote", "squote", "toDecimal",
	"print", "println", "html", "js", "urlquery",
}

// traversingFuncs compare or merge whole values (reflect.DeepEqual, mergo),
// recursing through shared references as often as they occur: their
// arguments may be at most MaxRenderBytes as measured (about four million
// elements), or their work would have no bound.
var traversingFuncs = []string{
	"deepEqual", "has", "mustHas", "without", "mustWithout", "uniq", "mustUniq",
	"merge", "mustMerge", "mergeOverwrite", "mustMergeOverwrite",
}

// copyingFuncs build a deep copy, as large as the value written out: its
// measured memory is charged to the budget first.
var copyingFuncs = []string{"deepCopy", "mustDeepCopy"}

// shallowFuncs take lists, maps or any values but look only at their top
// level, or store them by reference (set's and merge's cycles are checked
// in limits.go; eq and ne are replaced there, as text/template's print
// non-comparable values in their error).
var shallowFuncs = []string{
	"add", "add1", "add1f", "addf", "ago", "all", "any", "append", "biggest", "ceil", "chunk", "coalesce",
	"compact", "concat", "date", "dateInZone", "date_in_zone", "default", "dict", "dig", "div", "divf",
	"duration", "durationRound", "empty", "first", "float64", "floor", "get", "hasKey", "htmlDate",
	"htmlDateInZone", "initial", "int", "int64", "keys", "kindIs", "kindOf", "last", "list", "max", "maxf",
	"min", "minf", "mod", "mul", "mulf", "mustAppend", "mustChunk", "mustCompact", "mustFirst",
	"mustInitial", "mustLast", "mustPrepend", "mustPush", "mustRest", "mustReverse", "mustSlice", "omit",
	"pick", "pluck", "prepend", "push", "rest", "reverse", "round", "set", "slice", "sub", "subf",
	"ternary", "tuple", "typeIs", "typeIsLike", "typeOf", "unset", "urlJoin", "values", "eq", "ne",
	"fromYaml", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "unixEpoch",
}

func init() {
	for _, name := range printingFuncs {
		argChecks[name] = checkPrinted
	}
	for _, name := range traversingFuncs {
		argChecks[name] = checkTraversed
	}
	for _, name := range copyingFuncs {
		argChecks[name] = checkCopied
	}
	// dict writes its keys out with %v (sprig's strval); the values are
	// stored by reference.
	argChecks["dict"] = func(_ *budget, name string, args []reflect.Value) error {
		all := flatten(args)
		keys := make([]reflect.Value, 0, (len(all)+1)/2)
		for i := 0; i < len(all); i += 2 {
			keys = append(keys, all[i])
		}
		return checkPrinted(nil, name, keys)
	}
	argChecks["printf"] = checkPrintf
	// toYaml, fromYaml and fromJson hold what they allocate while they run
	// (yaml.go, json.go).
	argChecks["toYaml"] = checkToYaml
	argChecks["fromYaml"] = checkFromYaml
	argChecks["fromJson"] = checkFromJSON
	argChecks["mustFromJson"] = checkFromJSON
}

// flatten spreads a variadic function's last argument (the slice of the
// rest) into single arguments.
func flatten(args []reflect.Value) []reflect.Value {
	if len(args) == 0 {
		return args
	}
	last := args[len(args)-1]
	if last.Kind() != reflect.Slice || last.Type().Elem().Kind() != reflect.Interface {
		return args
	}
	out := make([]reflect.Value, 0, len(args)-1+last.Len())
	out = append(out, args[:len(args)-1]...)
	for i := range last.Len() {
		out = append(out, last.Index(i))
	}
	return out
}

// measureAll sums the sizes of args, with the limits shared.
func measureAll(args []reflect.Value, maxOut, maxMem int64) (size, error) {
	var total size
	for _, a := range args {
		n, err := measure(a, maxOut-total.out, maxMem-total.mem)
		total.out += n.out
		total.mem += n.mem
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// checkPrinted refuses arguments that written out take more than
// MaxStringBytes: the result would be longer (its size is a lower bound,
// counted only until it passes the limit).
func checkPrinted(_ *budget, name string, args []reflect.Value) error {
	n, err := measureAll(flatten(args), MaxStringBytes, unlimited)
	return printedErr(name, n, err)
}

// printedErr is checkPrinted's error for a measure's result.
func printedErr(name string, n size, err error) error {
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%s would return %d bytes, more than the limit of %d (counted before it ran: its arguments written out take at least that)", name, n.out, MaxStringBytes)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func checkTraversed(_ *budget, name string, args []reflect.Value) error {
	_, err := measureAll(flatten(args), unlimited, MaxRenderBytes)
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%s: its arguments are larger than %d bytes in all, the limit of values compared or merged", name, MaxRenderBytes)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func checkCopied(b *budget, name string, args []reflect.Value) error {
	n, err := measureAll(flatten(args), unlimited, b.left)
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%s: the copy would take more than the %d bytes left of the template's budget of %d", name, b.left, MaxRenderBytes)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.left -= n.mem
	return b.backed(name)
}
