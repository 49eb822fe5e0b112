package tmpl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Functions that allocate in proportion to a number (or a product of their
// arguments) fail above the limit instead of allocating: with the unbounded
// sprig versions, `repeat 400000000 "xxxxxxxx"` killed the controller with
// a fatal out-of-memory error. The over-limit sizes here are small (a few
// MiB) so the test stays cheap with the unbounded versions too.
func TestSizeLimits(t *testing.T) {
	cases := map[string]struct{ tpl, want string }{
		"repeat":             {`a: {{ repeat 2097152 "x" }}`, "repeat would return 2097152 bytes, more than the limit of 1048576"},
		"repeat overflow":    {`a: {{ repeat 9223372036854775807 "xx" }}`, "repeat would return"},
		"until":              {`a: {{ until 20000 | len }}`, "until would return 20000 elements, more than the limit of 10000"},
		"until negative":     {`a: {{ until -20000 | len }}`, "until would return 20000 elements"},
		"untilStep":          {`a: {{ untilStep 0 40000 2 | len }}`, "untilStep would return 20000 elements"},
		"seq":                {`a: {{ seq 300000 | len }}`, "seq would return"},
		"randAlpha":          {`a: {{ randAlpha 2097152 | len }}`, "randAlpha would return 2097152 bytes"},
		"randAlphaNum":       {`a: {{ randAlphaNum 2097152 | len }}`, "randAlphaNum would return"},
		"randAscii":          {`a: {{ randAscii 2097152 | len }}`, "randAscii would return"},
		"randNumeric":        {`a: {{ randNumeric 2097152 | len }}`, "randNumeric would return"},
		"randBytes":          {`a: {{ randBytes 2097152 | len }}`, "randBytes would return"},
		"indent":             {`a: {{ indent 2097152 "x" | len }}`, "indent would return"},
		"indent many lines":  {`a: {{ repeat 1000 "\n" | indent 3000 | len }}`, "indent would return"},
		"nindent":            {`a: {{ nindent 2097152 "x" | len }}`, "nindent would return"},
		"replace":            {`a: {{ replace "x" (repeat 3000 "y") (repeat 1000 "x") | len }}`, "replace would return"},
		"wrapWith":           {`a: {{ wrapWith 1 (repeat 100 "-") (repeat 30000 "x") | len }}`, "wrapWith would return"},
		"join":               {`a: {{ join (repeat 1000 "-") (until 3000) | len }}`, "join would return"},
		"cat doubling":       {`{{ $s := repeat 1000000 "x" }}a: {{ cat $s $s | len }}`, "cat would return"},
		"rendered output":    {"a: {{ range until 5 }}{{ repeat 1000000 \"x\" }}{{ end }}", "template output exceeds 4194304 bytes"},
		"output before yaml": {"{{ range until 2500 }}k{{ . }}: {{ repeat 2000 \"x\" }}\n{{ end }}", "template output exceeds 4194304 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: tc.tpl}, nil)
			var te *Error
			if !errors.As(err, &te) || te.Stage != "render" || !strings.Contains(te.Cause, tc.want) {
				t.Fatalf("err = %v (out has %d keys); want a render error containing %q", err, len(out), tc.want)
			}
			if !strings.Contains(err.Error(), `execution "deploy" (blueprint.yaml`) {
				t.Errorf("error %q does not name the execution and file", err)
			}
		})
	}
}

// Within the limits, the bounded functions behave like sprig's.
func TestBoundedFunctionsWithinLimits(t *testing.T) {
	tpl := `repeat: {{ repeat 3 "ab" }}
until: {{ until 3 | toJson }}
untilNeg: {{ until -2 | toJson }}
untilStep: {{ untilStep 1 7 3 | toJson }}
seq: "{{ seq 3 }}"
seqDown: "{{ seq 3 1 }}"
seqStep: "{{ seq 0 2 5 }}"
rand: {{ randAlpha 5 | len }}
randBytes: {{ randBytes 3 | len }}
indent: {{ "a\nb" | indent 2 | toJson }}
nindent: {{ "a" | nindent 1 | toJson }}
replace: {{ "a-b-c" | replace "-" "+" }}
wrap: "{{ wrapWith 2 "|" "abcd" }}"
join: {{ list "a" "b" 1 | join "," }}
cat: {{ cat "a" nil 1 "b" }}
big: {{ repeat 1048576 "x" | len }}
`
	out, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Template: tpl}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"repeat": "ababab", "until": []any{float64(0), float64(1), float64(2)}, "untilNeg": []any{float64(0), float64(-1)},
		"untilStep": []any{float64(1), float64(4)}, "seq": "1 2 3", "seqDown": "3 2 1", "seqStep": "0 2 4",
		"rand": float64(5), "randBytes": float64(4), "indent": "  a\n  b", "nindent": "\n a", "replace": "a+b+c",
		"wrap": "ab|cd", "join": "a,b,1", "cat": "a 1 b", "big": float64(1048576),
	}
	for k, v := range want {
		if got := out[k]; !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
}

// (The cases stay within a few hundred MiB without the budget, so that the
// test fails rather than exhausts the machine on code without it.)
//
// A loop that keeps many results, each within the per-function limits, or
// that grows a string with a function whose size is not known beforehand,
// fails the render instead of exhausting the controller's memory: every
// function's result counts against one budget per render. The same template
// kept under the budget renders.
func TestRenderBudget(t *testing.T) {
	over := map[string]struct{ tpl, want string }{
		"printf doubling": {`{{ $x := repeat 600000 "x" }}{{ range until 3 }}{{ $x = printf "%s%s" $x $x }}{{ end }}a: {{ len $x }}`, "printf would return 1200000 bytes, more than the limit of 1048576"},
		"print doubling":  {`{{ $x := repeat 600000 "x" }}{{ range until 3 }}{{ $x = print $x $x }}{{ end }}a: {{ len $x }}`, "print would return 1200000 bytes"},
		"b64enc growth":   {`{{ $x := repeat 1000 "x" }}{{ range until 30 }}{{ $x = b64enc $x }}{{ end }}a: {{ len $x }}`, "b64enc would return"},
		"toJson growth":   {`{{ $x := list (repeat 300000 "\"") }}{{ range until 3 }}{{ $x = list ($x | toJson) }}{{ end }}a: {{ len $x }}`, "toJson would return"},
		"html growth":     {`{{ $x := repeat 100000 "<" }}{{ range until 5 }}{{ $x = html $x }}{{ end }}a: {{ len $x }}`, "html would return"},
		"kept in a list":  {`{{ $l := list }}{{ range until 200 }}{{ $l = append $l (repeat 1000000 "x") }}{{ end }}a: {{ len $l }}`, "the template's functions returned more than 67108864 bytes in all"},
		"kept in a dict":  {`{{ $d := dict }}{{ range $i := until 200 }}{{ $_ := set $d (print $i) (repeat 1000000 "x") }}{{ end }}a: {{ len $d }}`, "more than 67108864 bytes in all"},
		"list of lists":   {`{{ $l := until 10000 }}{{ range until 100 }}{{ $l = concat $l (until 10000) }}{{ end }}a: {{ len $l }}`, "more than 67108864 bytes in all"},
	}
	for name, tc := range over {
		t.Run(name, func(t *testing.T) {
			_, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: tc.tpl}, nil)
			var te *Error
			if !errors.As(err, &te) || te.Stage != "render" || !strings.Contains(te.Cause, tc.want) {
				t.Fatalf("err = %v; want a render error containing %q", err, tc.want)
			}
		})
	}
	under := `{{ $l := list }}{{ range until 20 }}{{ $l = append $l (repeat 1000000 "x") }}{{ end }}` +
		`a: {{ len $l }}
b: {{ printf "%s-%s" "x" "y" }}
c: {{ print "p" 1 }}
d: {{ html "<a>" | len }}
e: {{ js "a<b" | len }}
f: {{ urlquery "a b" }}
g: "{{ println "l" | trim }}"`
	out, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: under}, nil)
	if err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	want := map[string]any{"a": float64(20), "b": "x-y", "c": "p1", "d": float64(len("&lt;a&gt;")), "e": float64(len(`a\u003Cb`)), "f": "a+b", "g": "l"}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("out = %v, want %v", out, want)
	}
}

// Each render has the whole budget: the function sets renders share are
// reset before each.
func TestRenderBudgetIsPerRender(t *testing.T) {
	tpl := `{{ $l := list }}{{ range until 40 }}{{ $l = append $l (repeat 1000000 "x") }}{{ end }}a: {{ len $l }}`
	for i := range 3 {
		if _, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: tpl}, nil); err != nil {
			t.Fatalf("render %d: %v", i+1, err)
		}
	}
}
