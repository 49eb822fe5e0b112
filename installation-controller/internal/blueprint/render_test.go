package blueprint

import (
	"strings"
	"testing"
)

// execBlueprint is a blueprint with one execution of the given kind
// ("deployExecutions", "subinstallationExecutions", "exportExecutions")
// rendering tmpl.
func execBlueprint(t *testing.T, kind, tmpl string) *Blueprint {
	t.Helper()
	src := kind + ":\n- name: e\n  type: GoTemplate\n  template: |\n"
	for _, line := range strings.Split(tmpl, "\n") {
		src += "    " + line + "\n"
	}
	bp, err := Parse(map[string]string{"blueprint.yaml": src})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return bp
}

// A rendered document of the wrong shape, or with a misspelled key, is an
// error naming the key and the shapes: read as "nothing rendered", it made
// the installation delete every sub-installation or deploy item it had.
func TestRenderedDocumentShape(t *testing.T) {
	const sub = "- name: a\n  blueprint: {dir: a}"
	const item = "- name: app\n  type: landscaper.gardener.cloud/mock"
	for name, tc := range map[string]struct {
		kind, tmpl string
		want       []string // substrings of the error; none: no error
	}{
		"subinstallations as mapping": {"subinstallationExecutions", "subinstallations:\n  a:\n    blueprint: {dir: a}",
			[]string{`execution "e"`, `"subinstallations" is a mapping, it must be a list`}},
		"subinstallations misspelled": {"subinstallationExecutions", "subInstallations:\n" + sub,
			[]string{`unknown top-level key(s) ["subInstallations"]`, `only "subinstallations"`}},
		"subinstallations extra key": {"subinstallationExecutions", "subinstallations:\n" + sub + "\nexports: {}",
			[]string{`unknown top-level key(s) ["exports"]`}},
		"subinstallations as string": {"subinstallationExecutions", "subinstallations: a",
			[]string{`"subinstallations" is a string, it must be a list`}},
		"deployItems misspelled": {"deployExecutions", "deployitems:\n" + item,
			[]string{`unknown top-level key(s) ["deployitems"]`, `only "deployItems"`}},
		"deployItems as mapping": {"deployExecutions", "deployItems:\n  app: {type: x}",
			[]string{`"deployItems" is a mapping, it must be a list`}},
		"exports as list": {"exportExecutions", "exports:\n- url: x",
			[]string{`"exports" is a list, it must be a mapping`}},
		"exports misspelled": {"exportExecutions", "export:\n  url: x",
			[]string{`unknown top-level key(s) ["export"]`}},
		// Empty output (a template wrapped in an if, a range over nothing)
		// is no items, as before.
		"empty subinstallations document": {"subinstallationExecutions", "{{ if false }}subinstallations: []{{ end }}", nil},
		"empty subinstallations list":     {"subinstallationExecutions", "subinstallations:", nil},
		"empty deployItems":               {"deployExecutions", "deployItems:", nil},
		"empty exports":                   {"exportExecutions", "exports:", nil},
		"valid subinstallations":          {"subinstallationExecutions", "subinstallations:\n" + sub, nil},
		"valid deployItems":               {"deployExecutions", "deployItems:\n" + item, nil},
		"valid exports":                   {"exportExecutions", "exports:\n  url: x", nil},
	} {
		t.Run(name, func(t *testing.T) {
			bp := execBlueprint(t, tc.kind, tc.tmpl)
			var err error
			switch tc.kind {
			case "deployExecutions":
				_, err = bp.DeployItems(map[string]any{}, nil)
			case "subinstallationExecutions":
				_, err = bp.SubinstallationTemplates(map[string]any{})
			default:
				_, err = bp.RenderExports(map[string]any{})
			}
			checkErr(t, err, tc.want)
		})
	}
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// subsBlueprint declares the parent's imports and static sub-installations.
func subsBlueprint(t *testing.T, subs string) *Blueprint {
	t.Helper()
	bp, err := Parse(map[string]string{"blueprint.yaml": "imports:\n- name: region\n- name: cluster\n  targetType: k8s\nsubinstallations:\n" + subs})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return bp
}

func sub(name, imports, exports string) string {
	s := "- name: " + name + "\n  blueprint: {dir: x}\n"
	if imports != "" {
		s += "  imports: " + imports + "\n"
	}
	if exports != "" {
		s += "  exports: " + exports + "\n"
	}
	return s
}

// Sub-installations of one parent are checked against each other when the
// parent renders them: object names, writers of the shared context, and
// import cycles (each of which the controller could only run wrongly).
func TestSubinstallationSiblings(t *testing.T) {
	for name, tc := range map[string]struct {
		subs string
		want []string
	}{
		"names sanitize alike": {sub("a_b", "", "") + sub("a-b", "", ""),
			[]string{`"a-b" and "a_b" get the same object name ("a-b"`}},
		"names differ in case": {sub("App", "", "") + sub("app", "", ""),
			[]string{`"App" and "app" get the same object name`}},
		"defined twice": {sub("a", "", "") + sub("a", "", ""),
			[]string{`subinstallation "a" is defined twice`}},
		"two-sibling cycle": {
			sub("a", "{data: [{name: in, dataRef: b-out}]}", "{data: [{name: out, dataRef: a-out}]}") +
				sub("b", "{data: [{name: in, dataRef: a-out}]}", "{data: [{name: out, dataRef: b-out}]}"),
			[]string{`in a cycle`, `"a" imports data "b-out" exported by "b"`, `"b" imports data "a-out" exported by "a"`}},
		"three-sibling cycle through a target": {
			sub("a", "{targets: [{name: t, target: c-cluster}]}", "{data: [{name: out, dataRef: a-out}]}") +
				sub("b", "{data: [{name: in, dataRef: a-out}]}", "{data: [{name: out, dataRef: b-out}]}") +
				sub("c", "{data: [{name: in, dataRef: b-out}]}", "{targets: [{name: t, target: c-cluster}]}"),
			[]string{`"a" imports target "c-cluster" exported by "c"`, `"c" imports data "b-out" exported by "b"`, `"b" imports data "a-out" exported by "a"`}},
		"chain without cycle": {
			sub("a", "", "{data: [{name: out, dataRef: a-out}]}") +
				sub("b", "{data: [{name: in, dataRef: a-out}]}", "{data: [{name: out, dataRef: b-out}]}") +
				sub("c", "{data: [{name: in, dataRef: b-out}, {name: r, dataRef: region}], targets: [{name: t, target: cluster}]}", ""),
			nil},
		"own export imported": {
			sub("a", "{data: [{name: in, dataRef: a-out}]}", "{data: [{name: out, dataRef: a-out}]}"), nil},
		"data and target of one name": {
			sub("a", "", "{data: [{name: out, dataRef: x}]}") + sub("b", "", "{targets: [{name: out, target: x}]}"), nil},
		"two siblings export one dataRef": {
			sub("a", "", "{data: [{name: out, dataRef: shared}]}") + sub("b", "", "{data: [{name: out, dataRef: shared}]}"),
			[]string{`subinstallations "a" and "b" both export data "shared"`}},
		"two siblings export one target": {
			sub("a", "", "{targets: [{name: t, target: shared}]}") + sub("b", "", "{targets: [{name: t, target: shared}]}"),
			[]string{`subinstallations "a" and "b" both export target "shared"`}},
		"export shadows a parent data import": {
			sub("a", "", "{data: [{name: out, dataRef: region}]}"),
			[]string{`subinstallation "a" exports data "region", which is an import of this blueprint`}},
		"export shadows a parent target import": {
			sub("a", "", "{targets: [{name: t, target: cluster}]}"),
			[]string{`subinstallation "a" exports target "cluster", which is an import of this blueprint`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := subsBlueprint(t, tc.subs).SubinstallationTemplates(map[string]any{})
			checkErr(t, err, tc.want)
		})
	}
}

// Rendered sub-installations are checked with the static ones: a cycle
// between a static and a rendered sibling is found too.
func TestSubinstallationCycleAcrossRenderedAndStatic(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": `subinstallations:
- name: a
  blueprint: {dir: x}
  imports: {data: [{name: in, dataRef: b-out}]}
  exports: {data: [{name: out, dataRef: a-out}]}
subinstallationExecutions:
- name: subs
  type: GoTemplate
  template: |
    subinstallations:
    - name: b
      blueprint: {dir: x}
      imports: {data: [{name: in, dataRef: a-out}]}
      exports: {data: [{name: out, dataRef: b-out}]}
`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bp.SubinstallationTemplates(map[string]any{})
	checkErr(t, err, []string{"in a cycle", `"a" imports data "b-out" exported by "b"`})
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{"a_b": "a-b", "App.Web": "app.web", "-x_": "x", "zone-1": "zone-1"} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A sub-installation import must be satisfied in the parent's context: by an
// import of the parent (data and target apart) or a sibling's export.
func TestSubinstallationImportsMustBeProvided(t *testing.T) {
	for name, tc := range map[string]struct {
		subs string
		want []string
	}{
		"parent imports and a sibling's export": {
			sub("a", "", "{data: [{name: out, dataRef: a-out}]}") +
				sub("b", "{data: [{name: in, dataRef: a-out}, {name: r, dataRef: region}], targets: [{name: t, target: cluster}]}", ""),
			nil},
		"data import nothing provides": {
			sub("a", "{data: [{name: in, dataRef: nobody}]}", ""),
			[]string{`subinstallation "a" imports data "nobody", which nothing in the context of its parent provides`, "its data imports are region"}},
		"target import nothing provides": {
			sub("a", "{targets: [{name: t, target: nowhere}]}", ""),
			[]string{`subinstallation "a" imports target "nowhere"`, "its target imports are cluster"}},
		"a data import is no target": {
			sub("a", "{targets: [{name: t, target: region}]}", ""),
			[]string{`subinstallation "a" imports target "region"`}},
	} {
		t.Run(name, func(t *testing.T) {
			subs, err := subsBlueprint(t, tc.subs).SubinstallationTemplates(map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			checkErr(t, CheckSubinstallationImports(subs, []string{"region"}, []string{"cluster"}, nil), tc.want)
		})
	}
}

// A deploy item's updateOnChangeOnly and onDelete reach the execution's
// item template, as the execution controller reads them there.
func TestDeployItemOptionsPassThrough(t *testing.T) {
	bp := execBlueprint(t, "deployExecutions", `deployItems:
- name: app
  type: landscaper.gardener.cloud/mock
  updateOnChangeOnly: true
  onDelete:
    skipUninstallIfClusterRemoved: true
`)
	items, err := bp.DeployItems(map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || !items[0].UpdateOnChangeOnly || items[0].OnDelete == nil || !items[0].OnDelete.SkipUninstallIfClusterRemoved {
		t.Errorf("rendered %+v", items)
	}
}
