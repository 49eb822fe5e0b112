package tmpl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/template"
)

// Limits on what one template may allocate. A template is user input and runs
// inside the controller: sprig's repeat, until, rand* and friends allocate in
// proportion to a number the template chooses, and an allocation the runtime
// cannot satisfy is a fatal "out of memory" that no recover catches, which
// would crash-loop the controller for every namespace. The functions below
// check the size first and fail the render (a TemplateFailed condition on the
// one Installation) instead.
const (
	// MaxStringBytes is the longest string a size-generating function
	// (repeat, indent, nindent, replace, wrap, wrapWith, join, cat, seq,
	// randAlpha, randAlphaNum, randAscii, randNumeric, randBytes) may return.
	MaxStringBytes = 1 << 20
	// MaxListLen is the longest list until and untilStep may return.
	MaxListLen = 10000
	// MaxOutputBytes is the most a template may render.
	MaxOutputBytes = 4 << 20
)

// errOutputTooLarge is returned by limitedWriter once the output is full.
var errOutputTooLarge = fmt.Errorf("template output exceeds %d bytes", MaxOutputBytes)

// limitedWriter fails writes beyond its limit, which aborts the render:
// text/template stops at the first write error. wrote, if set, is told of
// each write first, and may refuse it too.
type limitedWriter struct {
	w     io.Writer
	left  int
	wrote func(n int) error
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.left {
		return 0, errOutputTooLarge
	}
	if l.wrote != nil {
		if err := l.wrote(len(p)); err != nil {
			return 0, err
		}
	}
	l.left -= len(p)
	return l.w.Write(p)
}

func tooLong(fn string, n int64) error {
	return fmt.Errorf("%s would return %d bytes, more than the limit of %d", fn, n, MaxStringBytes)
}

func checkLen(fn string, n int64) error {
	if n > MaxStringBytes {
		return tooLong(fn, n)
	}
	return nil
}

// sat multiplies non-negative a and b, saturating instead of overflowing so a
// huge count cannot wrap around to a small size.
func sat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (1<<62)/b {
		return 1 << 62
	}
	return a * b
}

// listLen is the number of elements untilStep(start, stop, step) returns,
// computed without building the list (saturated like sat).
func listLen(start, stop, step int) int64 {
	switch {
	case stop < start && step < 0:
		return (int64(start) - int64(stop) + int64(-step) - 1) / int64(-step)
	case stop > start && step > 0:
		return (int64(stop) - int64(start) + int64(step) - 1) / int64(step)
	}
	return 0
}

func checkList(fn string, n int64) error {
	if n > MaxListLen {
		return fmt.Errorf("%s would return %d elements, more than the limit of %d", fn, n, MaxListLen)
	}
	return nil
}

// bound replaces, in f, every sprig function whose result can grow beyond
// its arguments' size with one that checks the size first.
func bound(f template.FuncMap) {
	untilStep := f["untilStep"].(func(start, stop, step int) []int)
	seq := f["seq"].(func(params ...int) string)
	rnd := func(name string) {
		orig := f[name].(func(int) string)
		f[name] = func(count int) (string, error) {
			if err := checkLen(name, int64(count)); err != nil {
				return "", err
			}
			return orig(count), nil
		}
	}
	for _, name := range []string{"randAlphaNum", "randAlpha", "randAscii", "randNumeric"} {
		rnd(name)
	}
	randBytes := f["randBytes"].(func(int) (string, error))
	f["randBytes"] = func(count int) (string, error) {
		// base64 makes 4 bytes of every 3.
		if err := checkLen("randBytes", sat(int64(count), 4)/3); err != nil {
			return "", err
		}
		return randBytes(count)
	}
	f["repeat"] = func(count int, s string) (string, error) {
		if count < 0 {
			return "", errors.New("repeat: negative count")
		}
		if err := checkLen("repeat", sat(int64(count), int64(len(s)))); err != nil {
			return "", err
		}
		return strings.Repeat(s, count), nil
	}
	f["until"] = func(count int) ([]int, error) {
		step := 1
		if count < 0 {
			step = -1
		}
		if err := checkList("until", listLen(0, count, step)); err != nil {
			return nil, err
		}
		return untilStep(0, count, step), nil
	}
	f["untilStep"] = func(start, stop, step int) ([]int, error) {
		if err := checkList("untilStep", listLen(start, stop, step)); err != nil {
			return nil, err
		}
		return untilStep(start, stop, step), nil
	}
	f["seq"] = func(params ...int) (string, error) {
		// seq's forms: (end) from 1, (start end), (start step end); it
		// counts towards end inclusive, one number per up to 20 bytes.
		var start, step, end = 1, 1, 0
		switch len(params) {
		case 1:
			end = params[0]
		case 2:
			start, end = params[0], params[1]
		case 3:
			start, step, end = params[0], params[1], params[2]
		}
		if len(params) != 3 && end < start {
			step = -1
		}
		n := listLen(start, end, step) + 1
		if err := checkLen("seq", sat(n, 21)); err != nil {
			return "", err
		}
		return seq(params...), nil
	}
	indentLen := func(spaces int, v string) int64 {
		return int64(len(v)) + sat(int64(spaces), int64(strings.Count(v, "\n")+1))
	}
	f["indent"] = func(spaces int, v string) (string, error) {
		if err := checkLen("indent", indentLen(spaces, v)); err != nil {
			return "", err
		}
		pad := strings.Repeat(" ", max(spaces, 0))
		return pad + strings.ReplaceAll(v, "\n", "\n"+pad), nil
	}
	f["nindent"] = func(spaces int, v string) (string, error) {
		if err := checkLen("nindent", indentLen(spaces, v)+1); err != nil {
			return "", err
		}
		pad := strings.Repeat(" ", max(spaces, 0))
		return "\n" + pad + strings.ReplaceAll(v, "\n", "\n"+pad), nil
	}
	f["replace"] = func(old, repl, src string) (string, error) {
		n := int64(strings.Count(src, old))
		if err := checkLen("replace", int64(len(src))+sat(n, int64(len(repl)))); err != nil {
			return "", err
		}
		return strings.ReplaceAll(src, old, repl), nil
	}
	wrapWith := f["wrapWith"].(func(int, string, string) string)
	wrapLen := func(l int, sep, str string) int64 {
		return int64(len(str)) + sat(int64(len(str))/int64(max(l, 1))+1, int64(len(sep)))
	}
	f["wrapWith"] = func(l int, sep, str string) (string, error) {
		if err := checkLen("wrapWith", wrapLen(l, sep, str)); err != nil {
			return "", err
		}
		return wrapWith(l, sep, str), nil
	}
	wrap := f["wrap"].(func(int, string) string)
	f["wrap"] = func(l int, str string) (string, error) {
		if err := checkLen("wrap", wrapLen(l, "\n", str)); err != nil {
			return "", err
		}
		return wrap(l, str), nil
	}
	toStrings := f["toStrings"].(func(any) []string)
	f["join"] = func(sep string, v any) (string, error) {
		parts := toStrings(v)
		var n int64
		for _, p := range parts {
			n += int64(len(p)) + int64(len(sep))
			if err := checkLen("join", n); err != nil {
				return "", err
			}
		}
		return strings.Join(parts, sep), nil
	}
	f["cat"] = func(v ...any) (string, error) {
		// Re-implements sprig's cat (non-nil values, space separated)
		// so that the size is checked as it grows; a template doubling a
		// string in a loop would otherwise reach any size.
		var b strings.Builder
		for _, x := range v {
			if x == nil {
				continue
			}
			s := fmt.Sprint(x)
			if err := checkLen("cat", int64(b.Len()+len(s)+1)); err != nil {
				return "", err
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(s)
		}
		return b.String(), nil
	}
}

// boundRegex replaces sprig's regexReplaceAll* with versions that check the
// result's size first: every match (an empty pattern matches between any two
// bytes) gets the replacement, so `regexReplaceAll "" (repeat 10000 "a")
// (repeat 10000 "b")` would build 100 MB from two 10 KB strings.
func boundRegex(f template.FuncMap) {
	replace := func(name string, literal bool) func(re, src, repl string) (string, error) {
		return func(re, src, repl string) (string, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return "", err
			}
			if err := checkLen(name, regexResultBound(r, src, repl, literal)); err != nil {
				return "", err
			}
			if literal {
				return r.ReplaceAllLiteralString(src, repl), nil
			}
			return r.ReplaceAllString(src, repl), nil
		}
	}
	f["regexReplaceAll"] = replace("regexReplaceAll", false)
	f["mustRegexReplaceAll"] = replace("mustRegexReplaceAll", false)
	f["regexReplaceAllLiteral"] = replace("regexReplaceAllLiteral", true)
	f["mustRegexReplaceAllLiteral"] = replace("mustRegexReplaceAllLiteral", true)
}

// regexResultBound is at least the length of src with every match of r
// replaced by repl: exact for a literal replacement; with expansion, each
// "$" of repl counted as a copy of the whole match (a submatch is at most
// that). Small inputs are not scanned: a string of n bytes has at most n+1
// matches.
func regexResultBound(r *regexp.Regexp, src, repl string, literal bool) int64 {
	dollars := int64(0)
	if !literal {
		dollars = int64(strings.Count(repl, "$"))
	}
	n := int64(len(src))
	if n+sat(n+1, int64(len(repl)))+sat(dollars, n) <= MaxStringBytes {
		return n
	}
	// Count the matches and their length with a replacement that builds
	// at most src.
	var count, matched int64
	r.ReplaceAllStringFunc(src, func(m string) string {
		count++
		matched += int64(len(m))
		return ""
	})
	return n - matched + sat(count, int64(len(repl))) + sat(dollars, matched)
}

// maxFmtWidth is the largest width or precision fmt accepts (larger ones
// print %!(BADWIDTH)).
const maxFmtWidth = 1_000_000

// checkPrintf checks printf's arguments like every printing function's
// (checkPrinted), and the widths and precisions of its format: each may be
// up to a million, so `printf (repeat 100 "%0999999d") 1 1 ...` would build
// 100 MB from a format of 1 KB. Their sum (with the format's length) may not
// pass MaxStringBytes. The scan follows fmt's: flags, an [n] argument index,
// a width or *, a precision or .*, the verb; a * takes its value from the
// argument it consumes.
func checkPrintf(_ *budget, name string, args []reflect.Value) error {
	all := flatten(args)
	if len(all) == 0 || all[0].Kind() != reflect.String {
		return checkPrinted(nil, name, all)
	}
	// The format's text is counted below, its verbs replaced.
	if err := checkPrinted(nil, name, all[1:]); err != nil {
		return err
	}
	format, operands := all[0].String(), all[1:]
	total := int64(len(format))
	argNum := 0
	star := func() int64 {
		defer func() { argNum++ }()
		if argNum < 0 || argNum >= len(operands) {
			return 0
		}
		v := operands[argNum]
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		var w int64
		switch {
		case v.CanInt():
			w = v.Int()
		case v.CanUint():
			w = int64(min(v.Uint(), maxFmtWidth))
		}
		if w < 0 {
			w = -w
		}
		return min(w, maxFmtWidth)
	}
	for i := 0; i < len(format); {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		index := func() {
			if i < len(format) && format[i] == '[' {
				j := strings.IndexByte(format[i:], ']')
				if j < 0 {
					i = len(format)
					return
				}
				if n, err := strconv.Atoi(format[i+1 : i+j]); err == nil {
					argNum = n - 1
				}
				i += j + 1
			}
		}
		number := func() int64 {
			var n int64
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				n = min(n*10+int64(format[i]-'0'), maxFmtWidth+1)
				i++
			}
			if n > maxFmtWidth {
				return 0
			}
			return n
		}
		index()
		var width, prec int64
		if i < len(format) && format[i] == '*' {
			i++
			width = star()
		} else {
			width = number()
		}
		if i < len(format) && format[i] == '.' {
			i++
			index()
			if i < len(format) && format[i] == '*' {
				i++
				prec = star()
			} else {
				prec = number()
			}
		}
		index()
		if i >= len(format) {
			break
		}
		verb := format[i]
		i++
		if verb == '%' {
			continue
		}
		operand := argNum
		argNum++
		// A string's precision cuts it; every other verb's pads.
		if verb == 's' || verb == 'q' {
			prec = 0
		}
		// fmt pads every element of a list or map (keys and values),
		// to any depth, not the operand once: `printf "%100000v"
		// (until 200)` built 20 MB.
		pad := width + prec
		padded := int64(1)
		if pad > 0 && operand >= 0 && operand < len(operands) {
			padded = fmtPadded(operands[operand], verb, (MaxStringBytes-total)/pad+1)
		}
		total += sat(pad, padded)
		if total > MaxStringBytes {
			return fmt.Errorf("%s would return more than %d bytes, the limit: the format's widths and precisions add up to more", name, MaxStringBytes)
		}
	}
	return nil
}

var (
	formatterType = reflect.TypeFor[fmt.Formatter]()
	stringerType  = reflect.TypeFor[fmt.Stringer]()
	errType       = reflect.TypeFor[error]()
)

// fmtPadded is how many values fmt pads when it prints v with verb: the
// leaves of lists, arrays, maps (keys and values) and structs, a value that
// formats itself (Formatter, or Stringer and error for the verbs that use
// them) counting as one; a byte slice is one string for %s, %q, %x and %X.
// It counts until it passes limit. v was measured first (checkPrinted), so
// it holds no cycle and nests at most maxDepth levels.
func fmtPadded(v reflect.Value, verb byte, limit int64) int64 {
	var n int64
	var walk func(v reflect.Value, depth int)
	walk = func(v reflect.Value, depth int) {
		if n > limit {
			return
		}
		if v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if !v.IsValid() || (v.Kind() == reflect.Interface && v.IsNil()) {
			n++
			return
		}
		if t := v.Type(); t.Implements(formatterType) ||
			(strings.IndexByte("vsxXq", verb) >= 0 && (t.Implements(stringerType) || t.Implements(errType))) {
			n++
			return
		}
		switch v.Kind() {
		case reflect.Slice, reflect.Array:
			if v.Type().Elem().Kind() == reflect.Uint8 && strings.IndexByte("sqxX", verb) >= 0 {
				n++
				return
			}
			for i := 0; i < v.Len() && n <= limit; i++ {
				walk(v.Index(i), depth+1)
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() && n <= limit {
				walk(it.Key(), depth+1)
				walk(it.Value(), depth+1)
			}
		case reflect.Struct:
			for i := 0; i < v.NumField() && n <= limit; i++ {
				walk(v.Field(i), depth+1)
			}
		case reflect.Pointer:
			// fmt prints &{...} for a pointer to a container at the
			// top level, an address below.
			switch v.Elem().Kind() {
			case reflect.Array, reflect.Slice, reflect.Struct, reflect.Map:
				if depth == 0 && !v.IsNil() {
					walk(v.Elem(), depth+1)
					return
				}
			}
			n++
		default:
			n++
		}
	}
	walk(v, 0)
	return max(n, 1)
}
