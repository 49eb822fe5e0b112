package blueprint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrace-dev/terrace/installation-controller/internal/schema"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

const typedBlueprint = `
localTypes:
  port: {type: integer, minimum: 1}
  endpoint:
    type: object
    required: [host]
    properties:
      host: {type: string}
      port: {$ref: "local://port"}
imports:
- name: endpoint
  schema: {$ref: "local://endpoint"}
- name: replicas
  schema:
    definitions:
      count: {type: integer, maximum: 9}
    $ref: "#/definitions/count"
- name: hostname
  required: false
  schema: {$ref: "file:///etc/hostname"}
exports:
- name: url
  schema: {$ref: "blueprint://schemas/url.json"}
`

func typed(t *testing.T) *Blueprint {
	t.Helper()
	bp, err := Parse(map[string]string{"blueprint.yaml": typedBlueprint, "schemas/url.json": `{"type": "string", "pattern": "^https://"}`})
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

// Import and export schemas refer to the blueprint's localTypes, their own
// definitions and its files, and to nothing outside it.
func TestSchemasReferToTheBlueprint(t *testing.T) {
	bp := typed(t)
	ok := map[string]any{"endpoint": map[string]any{"host": "h", "port": 80}, "replicas": 3}
	if _, err := bp.CompleteImports(ok, nil); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"local type":  {map[string]any{"endpoint": map[string]any{"host": "h", "port": 0}, "replicas": 3}, `import "endpoint": import endpoint: value does not match its schema: at /port: minimum`},
		"definitions": {map[string]any{"endpoint": map[string]any{"host": "h"}, "replicas": 10}, `import "replicas": import replicas: value does not match its schema: at /: maximum`},
		"file":        {map[string]any{"endpoint": map[string]any{"host": "h"}, "replicas": 1, "hostname": "x"}, `import "hostname": import hostname: invalid schema: reference "file:///etc/hostname": a schema may only refer to parts of its blueprint`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bp.CompleteImports(tc.values, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if err := bp.ValidateExports(map[string]any{"url": "https://x"}); err != nil {
		t.Fatal(err)
	}
	if err := bp.ValidateExports(map[string]any{"url": "http://x"}); err == nil || !strings.Contains(err.Error(), "export url: value does not match its schema") {
		t.Fatalf("error %v, want the export's pattern", err)
	}
}

// A blueprint's schemas are compiled once, however often it is parsed and
// validates (every reconcile parses it anew).
func TestBlueprintSchemasAreCompiledOnce(t *testing.T) {
	values := map[string]any{"endpoint": map[string]any{"host": "h"}, "replicas": 1}
	typed(t) // compiled by an earlier test or not: counting starts below
	if _, err := typed(t).CompleteImports(values, nil); err != nil {
		t.Fatal(err)
	}
	before := schema.Compilations()
	for range 3 {
		bp := typed(t)
		if _, err := bp.CompleteImports(values, nil); err != nil {
			t.Fatal(err)
		}
		if err := bp.ValidateExports(map[string]any{"url": "https://x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := schema.Compilations() - before; n != 0 {
		t.Fatalf("compiled %d more times, want none", n)
	}
}

// The reconcile's deadline stops every render of the blueprint.
func TestRendersStopAtTheReconcileDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	const long = "deployItems: []\n{{ range until 10000 }}{{ range until 400 }}{{ end }}{{ end }}"
	_, err := execBlueprint(t, "deployExecutions", long).DeployItemsContext(ctx, nil, ImportedTargets{})
	if !errors.Is(err, tmpl.ErrRenderDeadline) {
		t.Fatalf("error %v, want the reconcile's deadline", err)
	}
	_, err = execBlueprint(t, "subinstallationExecutions", long).SubinstallationTemplatesContext(ctx, nil)
	if !errors.Is(err, tmpl.ErrRenderDeadline) {
		t.Fatalf("error %v, want the reconcile's deadline", err)
	}
	_, err = execBlueprint(t, "exportExecutions", long).RenderExportsContext(ctx, nil)
	if !errors.Is(err, tmpl.ErrRenderDeadline) {
		t.Fatalf("error %v, want the reconcile's deadline", err)
	}
}
