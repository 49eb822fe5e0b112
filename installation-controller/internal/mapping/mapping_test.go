package mapping

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// parse parses mapping values given as JSON text.
func parse(t *testing.T, raw map[string]string) Mappings {
	t.Helper()
	b := make(map[string][]byte, len(raw))
	for k, v := range raw {
		b[k] = []byte(v)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// celMappings are CEL expressions under the explicit marker.
func celMappings(t *testing.T, exprs map[string]string) Mappings {
	t.Helper()
	raw := make(map[string]string, len(exprs))
	for k, e := range exprs {
		b, _ := json.Marshal(CELPrefix + e)
		raw[k] = string(b)
	}
	return parse(t, raw)
}

func TestEvaluateCEL(t *testing.T) {
	vars := map[string]any{
		"replicas": float64(2),
		"name":     "web",
		"config":   map[string]any{"port": float64(8080), "tls": true},
		"zones":    []any{"a", "b"},
	}
	cases := map[string]struct {
		expr string
		want any
		err  string
	}{
		"arithmetic":    {expr: "imports.replicas * 2", want: float64(4)},
		"string concat": {expr: `imports.name + "-svc"`, want: "web-svc"},
		"field":         {expr: "imports.config.port", want: float64(8080)},
		"object":        {expr: `{"host": imports.name, "port": imports.config.port}`, want: map[string]any{"host": "web", "port": float64(8080)}},
		"list map":      {expr: `imports.zones.map(z, "eu-" + z)`, want: []any{"eu-a", "eu-b"}},
		"conditional":   {expr: `imports.config.tls ? "https" : "http"`, want: "https"},
		"has":           {expr: `has(imports.missing) ? 1 : 0`, want: float64(0)},
		"strings ext":   {expr: `imports.name.upperAscii()`, want: "WEB"},
		"compile error": {expr: "imports.", err: `data mapping "m" (imports.)`},
		"runtime error": {expr: "imports.nope.x", err: "no such key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Evaluate(celMappings(t, map[string]string{"m": tc.expr}), ImportsVar, vars)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out["m"], tc.want) {
				t.Errorf("got %#v, want %#v", out["m"], tc.want)
			}
		})
	}
}

// A top-level string without a marker that is not `(( … ))` is CEL, as
// Terrace has always read it; nested strings are literals.
// A plain string is a literal, at the top of a mapping as inside it, as
// Landscaper reads it: only the cel: marker makes a CEL expression.
func TestPlainStringIsALiteral(t *testing.T) {
	m := parse(t, map[string]string{"top": `"imports.n * 2"`, "number": `"1"`, "nested": `{"s": "imports.n * 2"}`, "cel": `"cel: imports.n * 2"`})
	out, err := Evaluate(m, ImportsVar, map[string]any{"n": float64(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"top": "imports.n * 2", "number": "1", "nested": map[string]any{"s": "imports.n * 2"}, "cel": float64(6)}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v, want %#v", out, want)
	}
}

func TestParseRefusesNonJSON(t *testing.T) {
	if _, err := Parse(map[string][]byte{"a": []byte(`{`)}); err == nil || !strings.Contains(err.Error(), `data mapping "a"`) {
		t.Fatalf("got %v", err)
	}
}
