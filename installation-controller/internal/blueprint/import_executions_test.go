package blueprint

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Import executions shaped like Landscaper's: one derives a binding, the
// next one reads it, and the deploy execution sees both under .imports.
const importExecutionsBlueprint = `imports:
- name: domain
  schema: {type: string}
- name: replicas
  required: false
  schema: {type: integer}
importExecutions:
- name: derive
  type: GoTemplate
  template: |
    bindings:
      host: app.{{ .imports.domain }}
- name: check
  type: GoTemplate
  template: |
    bindings:
      url: https://{{ .imports.host }}
    errors:
    {{- if and .imports.replicas (gt (int .imports.replicas) 5) }}
    - "replicas must be at most 5, got {{ .imports.replicas }}"
    - "ask for a bigger quota first"
    {{- end }}
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: app
      type: landscaper.gardener.cloud/mock
      config:
        url: {{ .imports.url }}
`

func TestImportExecutionsAddBindings(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": importExecutionsBlueprint})
	if err != nil {
		t.Fatal(err)
	}
	imports, err := bp.RunImportExecutions(context.Background(), map[string]any{"imports": map[string]any{"domain": "example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if imports["host"] != "app.example.com" || imports["url"] != "https://app.example.com" || imports["domain"] != "example.com" {
		t.Fatalf("imports with bindings: %v", imports)
	}
	items, err := bp.DeployItems(map[string]any{"imports": imports}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(items[0].Config.Raw); !strings.Contains(got, `"url":"https://app.example.com"`) {
		t.Fatalf("the deploy execution does not see the binding: %s", got)
	}
}

func TestImportExecutionErrorsFailWithTheirMessages(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": importExecutionsBlueprint})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bp.RunImportExecutions(context.Background(), map[string]any{"imports": map[string]any{"domain": "example.com", "replicas": 7}})
	var ie *ImportExecutionError
	if !errors.As(err, &ie) {
		t.Fatalf("want an ImportExecutionError, got %v", err)
	}
	want := `import execution "check" (blueprint.yaml) refuses the imports: replicas must be at most 5, got 7; ask for a bigger quota first`
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err, want)
	}
}

func TestImportExecutionOutputShapes(t *testing.T) {
	cases := map[string]struct{ template, want string }{
		"errors not a list":     {"errors: oops", `the rendered "errors" is a string, it must be a list of strings`},
		"error not a string":    {"errors:\n- {a: 1}", `the rendered "errors"[0] is a mapping, it must be a string`},
		"bindings not a map":    {"bindings: [1]", `the rendered "bindings" is a list, it must be a mapping`},
		"misspelled top key":    {"binding: {a: 1}", `unknown top-level key(s) ["binding"]`},
		"many errors shortened": {"errors: [e0,e1,e2,e3,e4,e5,e6,e7,e8,e9,e10,e11]", "e9; and 2 more"},
	}
	for name, c := range cases {
		src := "importExecutions:\n- name: x\n  type: GoTemplate\n  template: |\n    " + strings.ReplaceAll(c.template, "\n", "\n    ") + "\n"
		bp, err := Parse(map[string]string{"blueprint.yaml": src})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = bp.RunImportExecutions(context.Background(), map[string]any{"imports": map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
}
