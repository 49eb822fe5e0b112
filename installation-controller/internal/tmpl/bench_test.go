package tmpl

import "testing"

// benchTemplate is a typical deploy execution: a few values printed, a
// range over an import, toYaml of a mapping (docs/performance.md: a render
// cost 0.25 ms with the pooled function sets).
const benchTemplate = `deployItems:
{{- range $i, $name := .imports.names }}
- name: app-{{ $i }}
  type: landscaper.gardener.cloud/mock
  config:
    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    export:
      host: {{ $name | lower }}-{{ $.imports.replicas }}.{{ $.context.domain | default "example.com" }}
      labels: {{ dict "app" $name "ns" $.installation.namespace | toJson }}
    providerConfig:
{{ toYaml $.imports.config | indent 6 }}
{{- end }}
`

func benchValues() map[string]any {
	return map[string]any{
		"imports": map[string]any{
			"names":    []any{"a", "b", "c"},
			"replicas": float64(3),
			"config":   map[string]any{"image": "nginx", "ports": []any{float64(80), float64(443)}, "env": map[string]any{"A": "1"}},
		},
		"context":      map[string]any{"domain": "example.org"},
		"installation": map[string]any{"name": "demo", "namespace": "default"},
	}
}

func BenchmarkExecute(b *testing.B) {
	src := Source{Execution: "deploy", File: "blueprint.yaml", Line: 1, Template: benchTemplate}
	values := benchValues()
	if _, err := Execute(src, values); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Execute(src, values); err != nil {
			b.Fatal(err)
		}
	}
}
