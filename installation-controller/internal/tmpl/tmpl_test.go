package tmpl

import (
	"strings"
	"testing"
)

func TestExecute(t *testing.T) {
	src := Source{Execution: "deploy", File: "blueprint.yaml", Line: 10, Template: "a: {{ .x | upper }}\nb: {{ toYaml .m | nindent 2 }}\nc: {{ (fromYaml \"k: v\").k }}\n"}
	out, err := Execute(src, map[string]any{"x": "hi", "m": map[string]any{"k": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if out["a"] != "HI" || out["c"] != "v" {
		t.Errorf("out = %v", out)
	}
	if m, ok := out["b"].(map[string]any); !ok || m["k"] != float64(1) {
		t.Errorf("b = %#v", out["b"])
	}
}

// A template cannot reach the controller's host: sprig's env, expandenv and
// getHostByName are not defined, so such a template fails to parse.
func TestTemplatesCannotReadTheControllersEnvironment(t *testing.T) {
	t.Setenv("TERRACE_TEST_SECRET", "s3cret")
	for fn, tpl := range map[string]string{"env": `a: {{ env "TERRACE_TEST_SECRET" }}`, "expandenv": `a: {{ expandenv "$TERRACE_TEST_SECRET" }}`, "getHostByName": `a: {{ getHostByName "example.invalid" }}`} {
		wantUnavailable(t, fn, tpl)
	}
}

// Nor can it spend the CPU every worker shares generating keys, signing
// certificates or hashing passwords: each such function is refused when the
// template is parsed, saying so.
func TestCostlyFunctionsAreNotAvailable(t *testing.T) {
	calls := map[string]string{
		"genPrivateKey":            `genPrivateKey "rsa"`,
		"genCA":                    `genCA "ca" 365`,
		"genCAWithKey":             `genCAWithKey "ca" 365 "key"`,
		"genSelfSignedCert":        `genSelfSignedCert "x" nil nil 365`,
		"genSelfSignedCertWithKey": `genSelfSignedCertWithKey "x" nil nil 365 "key"`,
		"genSignedCert":            `genSignedCert "x" nil nil 365 .ca`,
		"genSignedCertWithKey":     `genSignedCertWithKey "x" nil nil 365 .ca "key"`,
		"derivePassword":           `derivePassword 1 "long" "pw" "user" "example.com"`,
		"bcrypt":                   `bcrypt "pw"`,
		"htpasswd":                 `htpasswd "user" "pw"`,
		"encryptAES":               `encryptAES "key" "text"`,
		"decryptAES":               `decryptAES "key" "text"`,
	}
	for fn, call := range calls {
		wantUnavailable(t, fn, "a: 1\nb: {{ "+call+" }}")
	}
}

func wantUnavailable(t *testing.T, fn, tpl string) {
	t.Helper()
	out, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Template: tpl}, map[string]any{"ca": map[string]any{}})
	want := "parse failed: function " + fn + " is not available in Terrace templates"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: out = %v, err = %v; want %q", tpl, out, err, want)
	}
}

func TestErrorsNameExecutionFileLineAndSnippet(t *testing.T) {
	cases := map[string]struct {
		tpl    string
		values map[string]any
		want   []string
	}{
		"parse": {
			tpl:  "a: 1\nb: {{ end }}\nc: 3\n",
			want: []string{`execution "deploy" (blueprint.yaml, line 11): parse failed`, ">   11 | b: {{ end }}"},
		},
		"render": {
			tpl:    "a: 1\nb: 2\nc: {{ .x.y.z }}\nd: {{ index .list 5 }}\n",
			values: map[string]any{"x": map[string]any{"y": map[string]any{"z": 1}}, "list": []any{}},
			want:   []string{`(blueprint.yaml, line 13): render failed`, "index out of range", ">   13 | d: {{ index .list 5 }}"},
		},
		"yaml": {
			tpl:    "a: 1\nb: {{ .v }}\nc: 3\n",
			values: map[string]any{"v": "x: y: z"},
			want:   []string{"yaml failed", "rendered output, line 2", ">    2 | b: x: y: z"},
		},
		"function error": {
			tpl:  "a: {{ fail \"boom\" }}\n",
			want: []string{"line 10", "boom"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Line: 10, Template: tc.tpl}, tc.values)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// A misspelled import renders as nothing (missingkey=zero), and the action
// fails one step later ("nil pointer evaluating interface {}.metadata"):
// the error names the import the blueprint does not have and the ones it
// has. A failure under an import that exists gets no such note.
func TestMisspelledImportIsNamed(t *testing.T) {
	values := map[string]any{"imports": map[string]any{
		"cluster": map[string]any{"metadata": map[string]any{"name": "c"}},
		"db":      map[string]any{"url": "x"},
	}}
	for name, tc := range map[string]struct {
		tpl, want, notWant string
		values             map[string]any
	}{
		"misspelled": {tpl: "a: {{ .imports.clustr.metadata.name }}\n", values: values,
			want: `the blueprint has no import "clustr" (its imports: cluster, db)`},
		"no imports at all": {tpl: "a: {{ .imports.cluster.metadata.name }}\n", values: map[string]any{},
			want: `the blueprint has no import "cluster" (it has none)`},
		"existing import, other failure": {tpl: "a: {{ .imports.db.url.host }}\n", values: values,
			want: "can't evaluate field host", notWant: "has no import"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Execute(Source{Execution: "deploy", File: "blueprint.yaml", Template: tc.tpl}, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("err = %v, should not contain %q", err, tc.notWant)
			}
		})
	}
}
