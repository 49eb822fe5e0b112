package mapping

import (
	"reflect"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
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
			out, err := Evaluate(map[string]string{"m": tc.expr}, ImportsVar, vars)
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

func TestExpressions(t *testing.T) {
	got, err := Expressions(map[string][]byte{"a": []byte(`"imports.x"`)})
	if err != nil || got["a"] != "imports.x" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := Expressions(map[string][]byte{"a": []byte(`{"x":1}`)}); err == nil || !strings.Contains(err.Error(), "must be a string holding a CEL expression") {
		t.Fatalf("non-string mapping: %v", err)
	}
}
