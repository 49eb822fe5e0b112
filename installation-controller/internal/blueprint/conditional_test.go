package blueprint

import (
	"strings"
	"testing"
)

// A blueprint shaped like Landscaper's conditional-imports example: the
// password is only required when the optional URL is set.
const conditionalBlueprint = `imports:
- name: backup-storage-url
  required: false
  schema: {type: string}
  imports:
  - name: backup-storage-password
    schema: {type: string}
  - name: backup-region
    required: false
    schema: {type: string}
    imports:
    - name: backup-region-zone
      schema: {type: string}
`

func TestConditionalImportsAreRequiredOnlyWhenTheirConditionHolds(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": conditionalBlueprint})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(bp.Imports); got != 4 {
		t.Fatalf("want the nested imports flattened into 4 imports, got %d", got)
	}
	if d, _ := bp.Import("backup-region-zone"); d.Condition != "backup-region" || !d.Required {
		t.Fatalf("backup-region-zone: condition %q, required %v", d.Condition, d.Required)
	}
	// Nothing set: none of the conditional imports is required.
	if _, err := bp.CompleteImports(map[string]any{}, nil); err != nil {
		t.Fatalf("no condition holds, yet: %v", err)
	}
	// The URL set: the password is required, the region is still optional.
	_, err = bp.CompleteImports(map[string]any{"backup-storage-url": "s3://b"}, nil)
	if err == nil || !strings.Contains(err.Error(), `import "backup-storage-password": the blueprint requires this data import (a conditional import: required because import "backup-storage-url" is set)`) {
		t.Fatalf("want the password required, got %v", err)
	}
	if _, err := bp.CompleteImports(map[string]any{"backup-storage-url": "s3://b", "backup-storage-password": "pw"}, nil); err != nil {
		t.Fatal(err)
	}
	// Nested twice: the zone is required once the region is set.
	_, err = bp.CompleteImports(map[string]any{"backup-storage-url": "s3://b", "backup-storage-password": "pw", "backup-region": "eu"}, nil)
	if err == nil || !strings.Contains(err.Error(), `import "backup-region-zone"`) {
		t.Fatalf("want the zone required, got %v", err)
	}
	// A conditional import that is set is checked against its schema.
	_, err = bp.CompleteImports(map[string]any{"backup-storage-url": "s3://b", "backup-storage-password": 7}, nil)
	if err == nil || !strings.Contains(err.Error(), `import "backup-storage-password"`) {
		t.Fatalf("want the password's schema checked, got %v", err)
	}
}

func TestConditionalImportsNeedAnOptionalImport(t *testing.T) {
	cases := map[string]string{
		"required parent": "imports:\n- name: a\n  imports:\n  - {name: b}\n",
		"export":          "exports:\n- name: a\n  imports:\n  - {name: b}\n",
		"duplicate name":  "imports:\n- name: a\n  required: false\n  imports:\n  - {name: a}\n",
	}
	want := map[string]string{
		"required parent": `blueprint.yaml:2: import "a" has conditional imports (nested imports), so it must be optional: add ` + "`required: false`",
		"export":          `export "a" has nested imports`,
		"duplicate name":  `import "a" is declared twice`,
	}
	for name, src := range cases {
		_, err := Parse(map[string]string{"blueprint.yaml": src})
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: want %q, got %v", name, want[name], err)
		}
	}
}

func TestJSONSchemaVersionIsTheDefaultDraft(t *testing.T) {
	// Draft 4 reads exclusiveMinimum as a boolean modifier of minimum;
	// draft 2020-12 as a number, so the same schema means different things.
	src := func(version string) map[string]string {
		return map[string]string{"blueprint.yaml": version + "imports:\n- name: n\n  schema: {type: integer, minimum: 1, exclusiveMinimum: true}\n"}
	}
	bp, err := Parse(src("jsonSchemaVersion: http://json-schema.org/draft-04/schema#\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bp.CompleteImports(map[string]any{"n": 2}, nil); err != nil {
		t.Fatalf("draft 4: %v", err)
	}
	if _, err := bp.CompleteImports(map[string]any{"n": 1}, nil); err == nil {
		t.Fatal("draft 4: 1 is not above the exclusive minimum 1")
	}
	bp, err = Parse(src(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bp.CompleteImports(map[string]any{"n": 2}, nil); err == nil || !strings.Contains(err.Error(), "import n: invalid schema") {
		t.Fatalf("draft 2020-12 wants a number for exclusiveMinimum, got %v", err)
	}
	_, err = Parse(src("jsonSchemaVersion: https://json-schema.org/draft-03/schema\n"))
	if err == nil || !strings.Contains(err.Error(), `blueprint.yaml:1: jsonSchemaVersion: "https://json-schema.org/draft-03/schema" names no JSON schema draft`) {
		t.Fatalf("want the unknown draft refused, got %v", err)
	}
}

// Imports of sub-installations wired to optional or conditional imports the
// installation lacks are dropped; those wired to what it has, or to
// required imports, stay.
func TestDropUnsatisfiedImportsOfSubinstallations(t *testing.T) {
	src := `imports:
- name: foo
  required: false
  imports:
  - name: bar
- name: must
subinstallations:
- name: sub
  blueprint: {filesystem: {blueprint.yaml: ""}}
  imports:
    data:
    - {name: internalFoo, dataRef: foo}
    - {name: internalBar, dataRef: bar}
    - {name: internalMust, dataRef: must}
`
	bp, err := Parse(map[string]string{"blueprint.yaml": src})
	if err != nil {
		t.Fatal(err)
	}
	subs, err := bp.SubinstallationTemplates(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	bp.DropUnsatisfiedImports(subs, func(string) bool { return false })
	var names []string
	for _, d := range subs[0].Imports.Data {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "internalMust" {
		t.Fatalf("imports left: %v", names)
	}
	if got := len(bp.Subinstallations[0].Imports.Data); got != 3 {
		t.Fatalf("the blueprint's own template lost imports: %d left", got)
	}
	subs, _ = bp.SubinstallationTemplates(map[string]any{})
	bp.DropUnsatisfiedImports(subs, func(n string) bool { return n == "foo" })
	if got := len(subs[0].Imports.Data); got != 2 {
		t.Fatalf("with foo set only bar's import goes: %d left", got)
	}
}
