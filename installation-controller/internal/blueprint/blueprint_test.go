package blueprint

import (
	"strings"
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

const full = `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: replicas
  type: data
  required: false
  default:
    value: 2
  schema:
    type: integer
- name: cluster
  targetType: landscaper.gardener.cloud/kubernetes-cluster
- name: name
  schema: {type: string}
exports:
- name: url
  type: data
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: app
      type: landscaper.gardener.cloud/mock
      target:
        import: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        export:
          replicas: {{ .imports.replicas }}
          name: {{ .imports.name | upper }}
subinstallations:
- file: sub.yaml
subinstallationExecutions:
- name: subs
  type: GoTemplate
  file: subs.tpl
exportExecutions:
- name: exports
  type: GoTemplate
  template: |
    exports:
      url: https://{{ .values.deployitems.app.name }}
`

func files() map[string]string {
	return map[string]string{
		"blueprint.yaml": full,
		"sub.yaml": `name: static
blueprint:
  dir: child
imports:
  data:
  - name: x
    dataRef: y
`,
		"subs.tpl": `subinstallations:
{{- range $i := until 2 }}
- name: dyn{{ $i }}
  blueprint:
    filesystem:
      blueprint.yaml: "{}"
{{- end }}
`,
		"child/blueprint.yaml": "imports: []\n",
		"child/extra.txt":      "x",
	}
}

func TestParseFull(t *testing.T) {
	bp, err := Parse(files())
	if err != nil {
		t.Fatal(err)
	}
	if len(bp.Imports) != 3 || len(bp.Exports) != 1 || len(bp.DeployExecutions) != 1 || len(bp.ExportExecutions) != 1 {
		t.Fatalf("unexpected blueprint %+v", bp)
	}
	r, _ := bp.Import("replicas")
	if r.Required || !r.HasDefault || r.Default != int64(2) || r.Type != TypeData {
		t.Errorf("replicas = %+v", r)
	}
	c, _ := bp.Import("cluster")
	if c.Type != TypeTarget || !c.Required {
		t.Errorf("cluster = %+v", c)
	}
	// The inline template starts on the line after "template: |".
	if ex := bp.DeployExecutions[0]; ex.File != "blueprint.yaml" || ex.Line != 22 {
		t.Errorf("deploy execution at %s:%d, want blueprint.yaml:22", ex.File, ex.Line)
	}
	if ex := bp.SubinstallationExecutions[0]; ex.File != "subs.tpl" || ex.Line != 1 {
		t.Errorf("sub execution at %s:%d", ex.File, ex.Line)
	}
	if len(bp.Subinstallations) != 1 || bp.Subinstallations[0].Imports.Data[0].DataRef != "y" {
		t.Errorf("subinstallations = %+v", bp.Subinstallations)
	}
	fs, err := bp.Subinstallations[0].Filesystem(bp.Files)
	if err != nil || len(fs) != 2 || fs["extra.txt"] != "x" {
		t.Errorf("sub filesystem = %v, %v", fs, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"no blueprint.yaml":    {map[string]string{"other.yaml": ""}, "has no blueprint.yaml (files: other.yaml)"},
		"bad yaml":             {map[string]string{"blueprint.yaml": "imports: [\n"}, "not valid YAML"},
		"unknown field":        {map[string]string{"blueprint.yaml": "imprts: []\n"}, `blueprint.yaml:1: unknown field "imprts"`},
		"bad executor":         {map[string]string{"blueprint.yaml": "deployExecutions:\n- name: x\n  type: Spiff\n  template: a\n"}, `only "GoTemplate" is supported`},
		"missing file":         {map[string]string{"blueprint.yaml": "deployExecutions:\n- name: x\n  type: GoTemplate\n  file: nope.tpl\n"}, `references file "nope.tpl"`},
		"bad import type":      {map[string]string{"blueprint.yaml": "imports:\n- name: x\n  type: list\n"}, `supported are "data", "target", "targetList" and "targetMap"`},
		"duplicate import":     {map[string]string{"blueprint.yaml": "imports:\n- name: x\n- name: x\n"}, `import "x" is declared twice`},
		"unnamed import":       {map[string]string{"blueprint.yaml": "imports:\n- type: data\n"}, "needs a name"},
		"template not string":  {map[string]string{"blueprint.yaml": "deployExecutions:\n- name: x\n  type: GoTemplate\n  template: {a: b}\n"}, "template must be a string"},
		"unknown sub field":    {map[string]string{"blueprint.yaml": "subinstallations:\n- name: a\n  blueprnt: {}\n"}, "unknown field"},
		"missing sub file":     {map[string]string{"blueprint.yaml": "subinstallations:\n- file: a.yaml\n"}, `subinstallation file "a.yaml"`},
		"unnamed subinstallat": {map[string]string{"blueprint.yaml": "subinstallations:\n- blueprint: {dir: x}\n"}, "needs a name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCompleteImports(t *testing.T) {
	bp, err := Parse(files())
	if err != nil {
		t.Fatal(err)
	}
	tt := map[string]string{"cluster": lsv1alpha1.KubernetesClusterTargetType}
	cases := map[string]struct {
		values  map[string]any
		targets map[string]string
		want    string
	}{
		"ok with default":  {map[string]any{"name": "x", "cluster": map[string]any{}}, tt, ""},
		"missing required": {map[string]any{"cluster": map[string]any{}}, tt, `import "name": the blueprint requires this data import`},
		"schema":           {map[string]any{"name": 3.0, "cluster": map[string]any{}}, tt, `import "name": import name: value does not match its schema: at /: got number, want string`},
		"target as data":   {map[string]any{"name": "x", "cluster": "c"}, nil, "provides it as data"},
		"target type":      {map[string]any{"name": "x", "cluster": map[string]any{}}, map[string]string{"cluster": "other"}, `target has type "other"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := bp.CompleteImports(tc.values, tc.targets)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if out["replicas"] != int64(2) {
					t.Errorf("default not applied: %v", out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	bp, err := Parse(files())
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"imports": map[string]any{"replicas": int64(2), "name": "web"}}
	items, err := bp.DeployItems(values, map[string]string{"cluster": "my-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Target == nil || items[0].Target.Name != "my-cluster" {
		t.Fatalf("items = %+v", items)
	}
	if !strings.Contains(string(items[0].Config.Raw), `"name":"WEB"`) {
		t.Errorf("config = %s", items[0].Config.Raw)
	}
	if _, err := bp.DeployItems(values, nil); err == nil || !strings.Contains(err.Error(), `target import "cluster" is not a target import`) {
		t.Errorf("unresolved target import: %v", err)
	}
	subs, err := bp.SubinstallationTemplates(values)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 3 || subs[0].Name != "dyn0" || subs[2].Name != "static" {
		t.Errorf("subs = %+v", subs)
	}
	exports, err := bp.RenderExports(map[string]any{"values": map[string]any{"deployitems": map[string]any{"app": map[string]any{"name": "web"}}}})
	if err != nil || exports["url"] != "https://web" {
		t.Errorf("exports = %v, %v", exports, err)
	}
}
