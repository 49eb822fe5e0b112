package tmpl

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"text/template"
	"time"
)

// These tests cover what a template could do to the controller as a whole
// with the functions' own limits in place: values that contain themselves,
// values that shared references make huge, and renders that never end.
// Their sizes are chosen so that code without the checks fails them by a
// measured allocation, step count or time, not by exhausting the machine.

func render(tpl string, values map[string]any) (map[string]any, error) {
	return Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: tpl}, values)
}

// wantRenderError fails t unless err is a render error whose cause has want,
// and does not name a function the renderer inserted (steps.go: they are not
// the template's), and returns the line it names.
func wantRenderError(t *testing.T, err error, want string) int {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) || te.Stage != "render" || !strings.Contains(te.Cause, want) {
		t.Fatalf("err = %v; want a render error containing %q", err, want)
	}
	if name := insertedName.FindString(te.Cause); name != "" {
		t.Errorf("error %q names the inserted function %s", te.Cause, name)
	}
	return te.Line
}

// insertedName finds the name of any function steps.go inserts (listed
// here, not taken from tmpl.go's hiddenNames, which missed terraceTick).
var insertedName = regexp.MustCompile(strings.Join([]string{stepFunc, tickFunc, rangeFunc, outputFunc, enterFunc, leaveFunc}, "|"))

// allocated is the memory f allocated (process-wide: the tests in this
// package do not run in parallel).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A stack limit far below Go's default (1 GiB) makes code that recurses
// without end (fmt printing a map stored in itself) fail fast and cheaply.
func limitStack(t *testing.T) {
	old := debug.SetMaxStack(32 << 20)
	t.Cleanup(func() { debug.SetMaxStack(old) })
}

// set and merge mutate a map in place; storing the map inside itself was a
// fatal stack overflow as soon as anything printed it (every restart of the
// controller rendered it again and crashed again). They refuse now.
func TestMapsCannotBeStoredInThemselves(t *testing.T) {
	refused := map[string]string{
		"set":                `{{ $d := dict }}{{ $_ := set $d "a" $d }}a: 1`,
		"set nested":         `{{ $d := dict }}{{ $_ := set $d "a" (list 1 (dict "b" $d)) }}a: 1`,
		"set into a child":   `{{ $d := dict }}{{ $c := dict }}{{ $_ := set $d "c" $c }}{{ $_ := set $c "d" $d }}a: 1`,
		"merge":              `{{ $d := dict "x" 1 }}{{ $_ := merge $d (dict "a" $d) }}a: 1`,
		"mergeOverwrite":     `{{ $d := dict "x" 1 }}{{ $_ := mergeOverwrite $d (dict "a" (list $d)) }}a: 1`,
		"mustMerge":          `{{ $d := dict "x" 1 }}{{ $_ := mustMerge $d (dict "a" $d) }}a: 1`,
		"mustMergeOverwrite": `{{ $d := dict "x" 1 }}{{ $_ := mustMergeOverwrite $d (dict "a" $d) }}a: 1`,
	}
	for name, tpl := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := render(tpl, nil)
			wantRenderError(t, err, "would store the dict inside itself")
		})
	}
	// Sharing a map, or merging one into itself, makes no cycle.
	out, err := render(`{{ $s := dict "k" 1 }}{{ $d := dict }}{{ $_ := set $d "a" $s }}{{ $_ := set $d "b" (list $s $s) }}`+
		`{{ $_ := merge $d $d }}{{ $_ := mergeOverwrite $d (dict "c" $s) }}a: {{ toJson $d }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out["a"], map[string]any{"a": map[string]any{"k": float64(1)}, "b": []any{map[string]any{"k": float64(1)}, map[string]any{"k": float64(1)}}, "c": map[string]any{"k": float64(1)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("a = %#v, want %#v", got, want)
	}
}

// Whatever still holds itself (here: input built so), or nests deeper than
// maxDepth, is refused by every function that would print, encode, copy or
// compare it and by the printing of an action, instead of overflowing the
// stack.
func TestCyclicAndDeepValuesAreNotWalked(t *testing.T) {
	limitStack(t)
	cyclic := map[string]any{"k": "v"}
	cyclic["self"] = []any{cyclic}
	deep := any("x")
	for range maxDepth + 10 {
		deep = []any{deep}
	}
	values := map[string]any{"m": cyclic, "deep": deep}
	cases := []string{
		`a: {{ .m }}`, `a: {{ toJson .m }}`, `a: {{ toYaml .m }}`, `a: {{ toString .m }}`, `a: {{ printf "%v" .m }}`,
		`a: {{ print .m }}`, `a: {{ cat .m }}`, `a: {{ quote .m }}`, `a: {{ deepCopy .m | len }}`, `a: {{ deepEqual .m .m }}`,
		`a: {{ dict .m 1 | len }}`, `a: {{ toStrings .m | len }}`, `a: {{ .m.self }}`, `a: {{ list .m }}`,
	}
	for _, tpl := range cases {
		t.Run(tpl, func(t *testing.T) {
			_, err := render(tpl, values)
			wantRenderError(t, err, "the value contains itself")
		})
		if strings.Contains(tpl, ".m.self") {
			continue
		}
		deepTpl := strings.ReplaceAll(tpl, ".m", ".deep")
		t.Run(deepTpl, func(t *testing.T) {
			_, err := render(deepTpl, values)
			wantRenderError(t, err, "nested more than 1000 levels deep")
		})
	}
	// eq cannot print them either (text/template's printed them in its
	// error); it says what the types are.
	_, err := render(`a: {{ eq .m .m }}`, values)
	wantRenderError(t, err, "non-comparable type map[string]interface {}")
}

// sharedTemplate builds a list that written out is 5 MB from 100 KB of
// strings: a 50 000-byte string, ten times in a list, that list ten times.
const sharedTemplate = `{{ $s := repeat 50000 "x" }}{{ $l1 := list $s $s $s $s $s $s $s $s $s $s }}` +
	`{{ $l2 := list $l1 $l1 $l1 $l1 $l1 $l1 $l1 $l1 $l1 $l1 }}`

// Values that shared references make large are measured before they are
// printed or encoded: without that, `toJson`, `toYaml` or a plain
// {{ $l }} of a list like sharedTemplate's, three levels instead of two,
// built 0.4–1.7 GiB in memory before any limit saw the result. The same
// goes for regexReplaceAll (matches × replacement) and printf's widths.
// Each case must fail having allocated less than 4 MiB (without the checks
// they allocate 8 to 100 MiB).
func TestLargeResultsAreRefusedBeforeTheyAreBuilt(t *testing.T) {
	cases := map[string]struct{ tpl, want string }{
		"print action":    {sharedTemplate + `a: {{ $l2 }}`, "template output exceeds 4194304 bytes"},
		"toJson":          {sharedTemplate + `a: {{ toJson $l2 | len }}`, "toJson would return"},
		"toPrettyJson":    {sharedTemplate + `a: {{ toPrettyJson $l2 | len }}`, "toPrettyJson would return"},
		"toYaml":          {sharedTemplate + `a: {{ toYaml $l2 | len }}`, "toYaml would return"},
		"toString":        {sharedTemplate + `a: {{ toString $l2 | len }}`, "toString would return"},
		"printf %v":       {sharedTemplate + `a: {{ printf "%v" $l2 | len }}`, "printf would return"},
		"print":           {sharedTemplate + `a: {{ print $l2 | len }}`, "print would return"},
		"quote":           {sharedTemplate + `a: {{ quote $l2 | len }}`, "quote would return"},
		"join":            {sharedTemplate + `a: {{ join "," (list $l2) | len }}`, "join would return"},
		"dict key":        {sharedTemplate + `a: {{ dict $l2 1 | len }}`, "dict would return"},
		"regexReplaceAll": {`a: {{ regexReplaceAll "" (repeat 2000 "a") (repeat 2000 "b") | len }}`, "regexReplaceAll would return 4004000 bytes"},
		"regexReplaceAllLiteral": {`a: {{ regexReplaceAllLiteral "a" (repeat 2000 "a") (repeat 2000 "b") | len }}`,
			"regexReplaceAllLiteral would return 4000000 bytes"},
		"regexReplaceAll expanded": {`a: {{ regexReplaceAll "(a+)" (repeat 500000 "a") "$1$1$1" | len }}`, "regexReplaceAll would return"},
		"printf widths":            {`a: {{ printf (repeat 5 "%0999999d") 1 1 1 1 1 | len }}`, "printf would return more than 1048576 bytes"},
		"printf star widths":       {`a: {{ printf (repeat 5 "%*d") 999999 1 999999 1 999999 1 999999 1 999999 1 | len }}`, "printf would return more than"},
		"printf precision":         {`a: {{ printf (repeat 5 "%.999999f") 1.0 1.0 1.0 1.0 1.0 | len }}`, "printf would return more than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tc.tpl, nil) })
			wantRenderError(t, err, tc.want)
			if n > 4<<20 {
				t.Errorf("the render allocated %d bytes before it failed; want less than 4 MiB", n)
			}
		})
	}
	// Below the limits, the same functions work as before.
	out, err := render(`{{ $s := repeat 1000 "x" }}{{ $l := list $s $s }}`+
		`a: {{ toJson (list $l $l) | len }}
b: {{ regexReplaceAll "(b+)" "abbc" "[$1]" }}
c: {{ regexReplaceAllLiteral "b+" "abbc" "[$1]" }}
d: {{ printf "%05d|%-4s|%.2f|%*d|%[1]d" 42 "ab" 3.14159 3 7 }}
e: {{ printf "%d%%" 5 }}
f: {{ mustRegexReplaceAll "a" "banana" "o" }}
g: {{ $l | len }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": float64(4*1003 + 5), "b": "a[bb]c", "c": "a[$1]c", "d": "00042|ab  |3.14|  7|42", "e": "5%", "f": "bonono", "g": float64(2)}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("out = %#v, want %#v", out, want)
	}
}

// A deep copy takes as much memory as its value written out, not its own
// slots: it is charged its measured size.
func TestDeepCopyIsChargedItsWholeSize(t *testing.T) {
	// 63 MiB of the budget spent, then a copy of 100 000 numbers (1.6 MB
	// as measured) does not fit.
	tpl := `{{ $l := list }}{{ range until 63 }}{{ $l = append $l (repeat 1048576 "x") }}{{ end }}` +
		`{{ $a := until 10000 }}{{ $b := list $a $a $a $a $a $a $a $a $a $a }}{{ $c := deepCopy $b }}a: {{ len $c }}`
	_, err := render(tpl, nil)
	wantRenderError(t, err, "deepCopy: the copy would take more than")
	out, err := render(`{{ $a := until 10000 }}{{ $c := deepCopy (list $a $a) }}a: {{ len $c }}`, nil)
	if err != nil || out["a"] != float64(2) {
		t.Fatalf("out = %v, err = %v", out, err)
	}
}

// The comparisons text/template's eq printed its operands in its error
// (`eq $l $l` of a huge list built it whole); the replacement compares
// like it and names only the types.
func TestEqComparesLikeTextTemplates(t *testing.T) {
	values := map[string]any{
		"i": 3, "i2": 3, "u": uint(3), "f": 3.0, "s": "3", "b": true, "nil": nil, "m": map[string]any{}, "l": []any{1},
		"neg": -1, "big": uint64(1 << 63),
	}
	names := []string{"i", "i2", "u", "f", "s", "b", "nil", "m", "l", "neg", "big", "missing"}
	for _, a := range names {
		for _, b := range names {
			for _, op := range []string{"eq", "ne"} {
				tpl := "{{ " + op + " ." + a + " ." + b + " }}"
				builtin := template.Must(template.New("x").Option("missingkey=zero").Parse(tpl))
				var want bytes.Buffer
				wantErr := builtin.Execute(&want, values)
				out, err := render("a: \""+tpl+"\"", values)
				if (err != nil) != (wantErr != nil) {
					t.Errorf("%s: err = %v, text/template's = %v", tpl, err, wantErr)
					continue
				}
				if err == nil && out["a"] != want.String() {
					t.Errorf("%s = %v, text/template's = %s", tpl, out["a"], want.String())
				}
			}
		}
	}
	out, err := render(`a: {{ eq 1 2 3 1 }}`, nil)
	if err != nil || out["a"] != true {
		t.Errorf("eq with several operands: out = %v, err = %v", out, err)
	}
	var e error
	n := allocated(func() { _, e = render(sharedTemplate+`a: {{ eq $l2 $l2 }}`, nil) })
	wantRenderError(t, e, "non-comparable type []interface {}")
	if n > 4<<20 {
		t.Errorf("eq of a large list allocated %d bytes; want less than 4 MiB", n)
	}
}

// A render counts its steps (loop iterations and template calls) and stops
// after maxSteps or its deadline: two nested ranges over `until 10000` ran
// for 6 s, three would run for hours, holding a controller worker.
func TestRenderStepsAreLimited(t *testing.T) {
	defer func(old int64) { maxSteps = old }(maxSteps)
	maxSteps = 100_000
	// The line is that of the range or template the limit was hit in.
	cases := map[string]string{
		"nested ranges":      "a: 1\n{{ $u := until 1000 }}\n{{ range $u }}{{ range $u }}{{ end }}{{ end }}",
		"range of integer":   "a: 1\n\n{{ range 1000000 }}{{ end }}",
		"recursive define":   "a: 1\n\n{{ define \"r\" }}{{ if gt . 0 }}{{ template \"r\" (sub . 1) }}{{ template \"r\" (sub . 1) }}{{ end }}{{ end }}\n{{ template \"r\" 18 }}",
		"range in template":  "a: 1\n\n{{ define \"r\" }}{{ range until 1000 }}{{ end }}{{ end }}\n{{ range until 1000 }}{{ template \"r\" }}{{ end }}",
		"range else":         "a: 1\n{{ $u := until 1000 }}\n{{ range $u }}{{ range list }}{{ else }}{{ range $u }}{{ end }}{{ end }}{{ end }}",
		"break and continue": "a: 1\n{{ $u := until 1000 }}\n{{ range $u }}{{ range $u }}{{ if true }}{{ continue }}{{ end }}{{ end }}{{ if false }}{{ break }}{{ end }}{{ end }}",
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := render(tpl, nil)
			line := wantRenderError(t, err, "the template ran more than 100000 steps (loop iterations and template calls)")
			if line != 3 {
				t.Errorf("line = %d, want 3 (%s)", line, err)
			}
			if strings.Contains(err.Error(), stepFunc) {
				t.Errorf("error %q names the inserted function", err)
			}
			t.Logf("failed after %s", time.Since(start))
		})
	}
	// Within the limit, ranges and templates run as before.
	out, err := render(`{{ define "d" }}{{ . }}{{ end }}a: "{{ range $i, $v := list "x" "y" }}{{ $i }}{{ template "d" $v }}{{ end }}{{ range 2 }}{{ . }}{{ end }}{{ range list }}{{ else }}e{{ end }}"`, nil)
	if err != nil || out["a"] != "0x1y01e" {
		t.Errorf("out = %v, err = %v", out, err)
	}
	if MaxSteps < 1_000_000 || Timeout < time.Second {
		t.Errorf("MaxSteps = %d, Timeout = %s: too tight for real blueprints", MaxSteps, Timeout)
	}
}

// A render also stops at its deadline, checked at every step and before
// every function call (a few slow functions need no loop), and at the start
// of every template a template calls (a template calling itself twice
// below runs 2^26 calls, far more than the deadline allows).
func TestRenderTimeIsLimited(t *testing.T) {
	defer func(old time.Duration) { timeout = old }(timeout)
	timeout = 30 * time.Millisecond
	cases := map[string]string{
		"steps":          `a: {{ range until 3000 }}{{ range until 1000 }}{{ end }}{{ end }}1`,
		"function calls": `a: 1{{ $s := repeat 1048576 "x" }}` + strings.Repeat(`{{ $_ := sha256sum $s }}`, 200),
		"recursion":      `{{ define "r" }}{{ if gt . 0 }}{{ template "r" (sub . 1) }}{{ template "r" (sub . 1) }}{{ end }}{{ end }}a: 1{{ template "r" 25 }}`,
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := render(tpl, nil)
			wantRenderError(t, err, "the template ran longer than 30ms, the limit of one render")
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the render stopped after %s", d)
			}
		})
	}
}

// A render nests template calls and if, with and range blocks at most
// MaxNesting levels deep, all counted alike. text/template stops only at
// 100 000 calls: a template calling itself took a 64 MiB stack to get there
// (the stack limit here, 32 MiB, makes that a fatal error), and one calling
// itself inside ten nested withs overflowed Go's limit of 1 GiB, a fatal
// error that would crash-loop the controller. And an error unwinds nested
// ranges in time growing with the square of their depth (8 000 took 10 s,
// past any deadline), so blocks nested in one template count too.
func TestNestingIsLimited(t *testing.T) {
	limitStack(t)
	const want = "the template nests template calls and if, with and range blocks more than 1000 levels deep, the limit of one render"
	nested := func(n int, open, inner string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat("{{ end }}", n)
	}
	// The line named is that of the call or block past the limit.
	cases := map[string]string{
		"calling itself":           "{{ define \"r\" }}\n{{ template \"r\" . }}{{ end }}\n{{ template \"r\" . }}a: 1",
		"calling itself in blocks": "{{ define \"r\" }}{{ with . }}{{ range list 1 }}{{ if true }}\n{{ template \"r\" $ }}{{ end }}{{ end }}{{ end }}{{ end }}{{ template \"r\" 1 }}a: 1",
		"calling itself in withs":  "{{ define \"r\" }}" + nested(10, "{{ with . }}", "\n{{ template \"r\" . }}") + "{{ end }}{{ template \"r\" 1 }}a: 1",
		"calling itself in else":   "{{ define \"r\" }}{{ if eq . 0 }}{{ else if eq . 1 }}{{ else if eq . 2 }}{{ else }}\n{{ template \"r\" . }}{{ end }}{{ end }}{{ template \"r\" 3 }}a: 1",
		"calling each other":       "{{ define \"a\" }}{{ template \"b\" . }}{{ end }}{{ define \"b\" }}\n{{ template \"a\" . }}{{ end }}{{ template \"a\" . }}a: 1",
		"block":                    "{{ block \"r\" . }}\n{{ template \"r\" . }}{{ end }}a: 1",
		// No recursion: two templates of 600 nested blocks each, one
		// calling the other.
		"calls of nested blocks": "{{ define \"a\" }}" + nested(600, "{{ with . }}", "\n{{ template \"b\" . }}") + "{{ end }}{{ define \"b\" }}" +
			nested(600, "{{ if . }}", "x") + "{{ end }}{{ template \"a\" 1 }}a: 1",
		// No call at all: the template is refused before it runs.
		"nested blocks": "{{ $u := list 1 }}" + nested(1000, "{{ range $u }}", "\n{{ range $u }}{{ end }}") + "a: 1",
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render(tpl, nil)
			if line := wantRenderError(t, err, want); line != 2 {
				t.Errorf("line = %d, want 2 (%s)", line, err)
			}
		})
	}
	// Within the limit, calls and blocks run as before: here 500 calls,
	// the first nesting one level, the 499 others two each (the if and the
	// call), and the if in the last: 1000 levels. One call more is refused.
	recursion := `{{ define "r" }}{{ if gt . 0 }}{{ template "r" (sub . 1) }}{{ end }}x{{ end }}a: "{{ template "r" 499 }}"`
	out, err := render(recursion, nil)
	if err != nil || out["a"] != strings.Repeat("x", 500) {
		t.Errorf("500 calls: out = %v, err = %v", out, err)
	}
	_, err = render(strings.Replace(recursion, "499", "500", 1), nil)
	wantRenderError(t, err, want)
	out, err = render("{{ $u := list 1 }}"+nested(1000, "{{ range $u }}", "x")+"a: 1", nil)
	if err != nil || out["xa"] != float64(1) {
		t.Errorf("1000 nested ranges: out = %v, err = %v", out, err)
	}
}

// An {{ else if }} chain reads as flat but is an if inside the else of the
// one before it, in text/template's tree and on the stack: a chain of more
// than MaxNesting links is refused like any nesting that deep, and the error
// says that such chains count, or the user finds no nesting in the template
// at all. The line named is that of the link past the limit.
func TestElseIfChainsCountAsNesting(t *testing.T) {
	limitStack(t)
	chain := func(links int) string {
		var b strings.Builder
		b.WriteString("{{ $v := 7 }}{{ if eq $v 0 }}a: 0\n")
		for i := 1; i < links; i++ {
			fmt.Fprintf(&b, "{{ else if eq $v %d }}a: %d\n", i, i)
		}
		return b.String() + "{{ end }}"
	}
	out, err := render(chain(MaxNesting), nil)
	if err != nil || out["a"] != float64(7) {
		t.Fatalf("a chain of %d links: out = %v, err = %v", MaxNesting, out, err)
	}
	_, err = render(chain(MaxNesting+1), nil)
	line := wantRenderError(t, err, "more than 1000 levels deep, the limit of one render "+
		"(each {{ else if }} or {{ else with }} of a chain counts as a block inside the one before it: a chain of more than 1000 of them is refused too")
	if line != MaxNesting+1 {
		t.Errorf("line = %d, want %d, the link past the limit (%s)", line, MaxNesting+1, err)
	}
}

// The inserted functions are not the template's: it cannot call them.
func TestInsertedFunctionsCannotBeCalled(t *testing.T) {
	for _, tpl := range []string{`a: {{ ` + stepFunc + ` }}`, `a: {{ ` + outputFunc + ` 1 }}`, `a: {{ 1 | ` + outputFunc + ` }}`, `a: {{ ` + leaveFunc + ` 1000 }}`} {
		_, err := render(tpl, nil)
		var te *Error
		if !errors.As(err, &te) || te.Stage != "parse" || !strings.Contains(te.Cause, "not defined") {
			t.Errorf("%s: err = %v; want a parse error: function not defined", tpl, err)
		}
	}
}

// Printing through the output check prints exactly what text/template
// printed before.
func TestPrintedValuesAreUnchanged(t *testing.T) {
	values := map[string]any{"s": "x", "n": float64(1.5), "null": nil, "l": []any{"a", float64(2), nil, map[string]any{"k": true}}, "m": map[string]any{"b": 1, "a": []any{}}}
	tpl := `a: "{{ .s }}|{{ .n }}|{{ .null }}|{{ .missing }}|{{ .l }}|{{ .m }}|{{ 3 }}|{{ true }}|{{ "q" }}|{{ list }}|{{ dict }}"`
	out, err := render(tpl, values)
	if err != nil {
		t.Fatal(err)
	}
	builtin := template.Must(template.New("x").Funcs(template.FuncMap{"list": func(v ...any) []any { return v }, "dict": func() map[string]any { return map[string]any{} }}).Option("missingkey=zero").Parse(tpl))
	var want bytes.Buffer
	if err := builtin.Execute(&want, values); err != nil {
		t.Fatal(err)
	}
	if w := strings.TrimSuffix(strings.TrimPrefix(want.String(), `a: "`), `"`); out["a"] != w {
		t.Errorf("a = %q, text/template printed %q", out["a"], w)
	}
}

// Every function that takes lists, maps or any values is classified: it
// either walks its arguments whole, and they are measured first, or it only
// looks at their top level. A new sprig version's functions fail here until
// they are looked at.
func TestEveryFunctionIsClassified(t *testing.T) {
	known := map[string]bool{}
	for _, l := range [][]string{printingFuncs, traversingFuncs, copyingFuncs, shallowFuncs} {
		for _, name := range l {
			known[name] = true
		}
	}
	known["printf"] = true
	for name, fn := range funcs(&budget{}) {
		ty := reflect.TypeOf(fn)
		for i := range ty.NumIn() {
			in := ty.In(i)
			if ty.IsVariadic() && i == ty.NumIn()-1 {
				in = in.Elem()
			}
			switch in.Kind() {
			case reflect.Interface, reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer:
				if !known[name] && in != reflect.TypeFor[reflect.Value]() {
					t.Errorf("%s %v takes %v: add it to printingFuncs, traversingFuncs, copyingFuncs or shallowFuncs", name, ty, in)
				}
			}
		}
	}
}
