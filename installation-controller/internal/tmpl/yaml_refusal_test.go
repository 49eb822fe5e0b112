package tmpl

import (
	"errors"
	"strings"
	"testing"
)

// toYaml and fromYaml allocate, for a moment, many times what they take or
// return: toYaml of 100 000 numbers (500 KB written out) allocated 130 MB,
// fromYaml of 700 KB of one-key maps 183 MB and of 8 KB of aliases 49 MB. A
// call that would allocate more than the budget left is refused before it
// runs (yaml.go).
func TestYAMLFunctionsAreRefusedBeforeTheyAllocate(t *testing.T) {
	for name, tc := range map[string]struct{ tpl, want string }{
		"toYaml of many nodes": {
			`{{ $u := until 10000 }}{{ $l := list $u $u $u $u $u $u $u $u $u $u }}{{ $y := toYaml $l }}a: {{ len $y }}`,
			"bytes while it runs (100011 nodes, 200021 bytes written out), more than the",
		},
		"fromYaml of many nodes": {
			`{{ $s := printf "[%s{}]" (repeat 100000 "{a: 0},") }}{{ $v := fromYaml $s }}a: {{ len $v }}`,
			"bytes while it runs (700004 bytes of YAML, up to 600005 nodes), more than the",
		},
		"fromYaml of aliases": {
			`{{ $s := printf "a: &a [%s0]\nb: [%s*a]" (repeat 4000 "0,") (repeat 98 "*a,") }}{{ $v := fromYaml $s }}a: {{ len $v }}`,
			"bytes while it runs (8311 bytes of YAML, up to 8205 nodes and 396198 more copied by its aliases), more than the",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tc.tpl, nil) })
			wantRenderError(t, err, tc.want)
			wantRenderError(t, err, "would allocate about")
			// The call allocated from 49 MB to 183 MB.
			if limit := uint64(16 << 20); n > limit {
				t.Errorf("the render allocated %d bytes; want less than %d", n, limit)
			}
		})
	}
}

// The rendered document is decoded like fromYaml's text, and refused the
// same way: decoding 4 MB of `0,` allocated 680 MB, 8 KB of aliases 49 MB.
func TestRenderedDocumentIsRefusedBeforeItIsDecoded(t *testing.T) {
	for name, tc := range map[string]struct{ tpl, want string }{
		"many nodes": {
			`a: [{{ range until 4 }}{{ repeat 500000 "0," }}{{ end }}0]`,
			"decoding the rendered document would allocate about",
		},
		"aliases": {
			"a: &a [{{ repeat 4000 \"0,\" }}0]\nb: [{{ repeat 98 \"*a,\" }}*a]",
			"more copied by its aliases",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tc.tpl, nil) })
			var te *Error
			if !errors.As(err, &te) || te.Stage != "yaml" || !strings.Contains(te.Cause, tc.want) {
				t.Fatalf("err = %v; want a yaml error containing %q", err, tc.want)
			}
			if limit := uint64(32 << 20); n > limit {
				t.Errorf("the render allocated %d bytes; want less than %d", n, limit)
			}
		})
	}
	// A document of about 1 MB of ordinary manifests (as a deploy item of
	// CRDs can be; an Execution holds at most about 1.5 MB) still decodes.
	manifest := "    - manifest:\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: cm\n" +
		"          labels:\n            app: demo\n        data:\n          description: \"How the thing is reconciled, see the docs.\"\n          type: string\n"
	big := "deployItems:\n- name: crds\n  config:\n    manifests:\n" + strings.Repeat(manifest, 1_000_000/len(manifest))
	if out, err := render(big, nil); err != nil || len(out["deployItems"].([]any)) != 1 {
		t.Errorf("a 1 MB document of manifests: err = %v", err)
	}
	// A document with aliases within the budget decodes as before, and
	// one yaml.v3 cannot parse is refused with the line it names.
	out, err := render("a: &x [1, 2]\nb: *x\nc: '*.example.com'", nil)
	if err != nil || len(out["b"].([]any)) != 2 || out["c"] != "*.example.com" {
		t.Errorf("out = %v, err = %v", out, err)
	}
	_, err = render("a: '*'\nb: [1, 2\nc: 3", nil)
	var te *Error
	if !errors.As(err, &te) || te.Stage != "yaml" || !strings.Contains(te.Cause, "rendered output, line") {
		t.Errorf("err = %v; want a yaml error naming the line", err)
	}
}

// Calls of the sizes real blueprints make work as before, aliases included,
// and what a call held while it ran is given back: each toYaml below holds
// more than half the budget.
func TestYAMLFunctionsWithinTheBudget(t *testing.T) {
	out, err := render(`a: {{ toYaml (dict "b" (list 1 "x" true) "a" nil "c" "<&>") | quote }}
b: '{{ fromYaml "base: &b {x: 1}\nother: *b\nhost: '*.example.com'\nyes: no" | toJson }}'
c: {{ $l := concat (until 10000) (until 5000) }}{{ range until 5 }}{{ $y := toYaml $l }}{{ end }}{{ len $l }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": "a: null\nb:\n- 1\n- x\n- true\nc: <&>",
		"b": `{"base":{"x":1},"host":"*.example.com","other":{"x":1},"true":false}`,
		"c": float64(15000),
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %#v; want %#v", k, out[k], v)
		}
	}
	// An alias inside the node its anchor names is refused as yaml.v2
	// refuses it (the node tree counted for aliases has a cycle there).
	for _, doc := range []string{`a: &a [1, *a]`, `a: &a {b: *a}`, `&a [[*a]]`} {
		_, err := render(`{{ $v := fromYaml `+"`"+doc+"`"+` }}a: 1`, nil)
		wantRenderError(t, err, "anchor 'a' value contains itself")
		_, err = render(doc, nil)
		var te *Error
		if !errors.As(err, &te) || te.Stage != "yaml" || !strings.Contains(te.Cause, "anchor 'a' value contains itself") {
			t.Errorf("%s: err = %v; want a yaml error", doc, err)
		}
	}
}
