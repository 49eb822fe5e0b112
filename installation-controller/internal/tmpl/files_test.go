package tmpl

import (
	"strings"
	"testing"
)

func filesSource(template string, files map[string]string) Source {
	return Source{Execution: "e", File: "blueprint.yaml", Line: 1, Template: template, Files: files}
}

// include renders a file of the blueprint with the given data, includes
// nest, and readFile and readDir read the blueprint's filesystem.
func TestBlueprintFilesystemFunctions(t *testing.T) {
	files := map[string]string{
		"blueprint.yaml":        "ignored",
		"data/config":           "replicas: {{ .replicas }}\n{{ include \"data/labels\" . }}",
		"data/labels":           "labels: {app: {{ .app }}}",
		"data/raw.txt":          "{{ not a template }}",
		"data/nested/deep.yaml": "x: 1",
	}
	out, err := Execute(filesSource(`config:
{{ include "data/config" .imports | indent 2 }}
raw: {{ readFile "./data/raw.txt" | quote }}
entries: {{ range readDir "data" }}{{ .Name }}{{ if .IsDir }}/{{ end }} {{ end }}
root: {{ range readDir "" }}{{ .Name }} {{ end }}
`, files), map[string]any{"imports": map[string]any{"replicas": 2, "app": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := out["config"].(map[string]any)
	if cfg["replicas"] != float64(2) || cfg["labels"].(map[string]any)["app"] != "web" {
		t.Errorf("config = %v", out["config"])
	}
	if out["raw"] != "{{ not a template }}" {
		t.Errorf("raw = %q", out["raw"])
	}
	if out["entries"] != "config labels nested/ raw.txt" {
		t.Errorf("entries = %q", out["entries"])
	}
	if out["root"] != "blueprint.yaml data" {
		t.Errorf("root = %q", out["root"])
	}
}

// Bad paths and self-inclusion fail the render naming the call; files are
// never read from outside the blueprint.
func TestBlueprintFilesystemFunctionErrors(t *testing.T) {
	files := map[string]string{"blueprint.yaml": "x", "self": "{{ include \"self\" . }}", "a": "x: 1"}
	for tmpl, want := range map[string]string{
		`{{ include "missing" . }}`:         `include "missing": no such file in the blueprint`,
		`{{ include "../etc/passwd" . }}`:   `include "../etc/passwd": a path leaving the blueprint`,
		`{{ readFile "missing" }}`:          `readFile "missing": no such file in the blueprint`,
		`{{ readFile "/../../a" }}`:         `readFile "/../../a": a path leaving the blueprint`,
		`{{ readDir "nothing" }}`:           `readDir "nothing": no such directory in the blueprint`,
		`{{ include "self" . }}`:            `includes nest more than 16 deep`,
		`{{ $p := "a" }}{{ include $p . }}`: `include "a": write the path as a literal string`,
		`{{ include "bad" . }}`:             `include "bad": template: `,
	} {
		f := map[string]string{"bad": "{{ if }}"}
		for k, v := range files {
			f[k] = v
		}
		_, err := Execute(filesSource(tmpl, f), map[string]any{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", tmpl, err, want)
		}
	}
}

// An included file runs under the render's step limit like the
// execution's own text.
func TestIncludedFileCountsSteps(t *testing.T) {
	defer func(n int64) { maxSteps = n }(maxSteps)
	maxSteps = 1000
	files := map[string]string{"loop": "{{ range until 100 }}{{ range until 100 }}{{ end }}{{ end }}"}
	_, err := Execute(filesSource(`x: {{ include "loop" . }}`, files), map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "steps") {
		t.Errorf("got %v, want the step limit", err)
	}
}

// Without the blueprint's files the functions say there is no such file.
func TestFilesystemFunctionsWithoutFiles(t *testing.T) {
	_, err := Execute(Source{Execution: "e", Template: `{{ readFile "a" }}`}, map[string]any{})
	if err == nil || !strings.Contains(err.Error(), `readFile "a": no such file in the blueprint`) {
		t.Errorf("got %v", err)
	}
}
