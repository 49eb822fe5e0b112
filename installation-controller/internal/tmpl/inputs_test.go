package tmpl

import (
	"context"
	"strings"
	"testing"
	"text/template"
)

// A context's Inputs reach the render: its values beside the execution's
// (which win on the same key) and its functions, whose results count
// against the render's budget like the executor's own.
func TestInputsReachTheRender(t *testing.T) {
	ctx := WithInputs(context.Background(), Inputs{
		Values: map[string]any{"cd": map[string]any{"name": "app"}, "imports": "shadowed"},
		Funcs:  template.FuncMap{"greet": func(s string) string { return "hello " + s }},
	})
	out, err := ExecuteContext(ctx, Source{Execution: "x", File: "f", Template: "a: {{ greet .cd.name }}\nb: {{ .imports.v }}\n"},
		map[string]any{"imports": map[string]any{"v": "own"}})
	if err != nil {
		t.Fatal(err)
	}
	if out["a"] != "hello app" || out["b"] != "own" {
		t.Fatalf("got %v", out)
	}

	big := WithInputs(context.Background(), Inputs{Funcs: template.FuncMap{
		"huge": func() string { return strings.Repeat("x", int(MaxOutputBytes)*4) },
	}})
	if _, err := ExecuteContext(big, Source{Execution: "x", File: "f", Template: "{{ $h := huge }}{{ $h := huge }}{{ $h := huge }}{{ $h := huge }}a: 1\n"}, nil); err == nil {
		t.Fatal("a function's results beyond the render's budget must fail the render")
	}
}
