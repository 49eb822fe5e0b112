package components

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"text/template"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// templating resolves acme.org/app (a blueprint blob, a chart artifact
// and a reference "lib" to acme.org/lib with an image) and prepares it.
func templating(t *testing.T) (*Templating, map[string]any, *env) {
	t.Helper()
	e := newEnv(t)
	e.push(t, component{name: "acme.org/lib", version: "2.0.0", artifacts: map[string]string{"image": "ghcr.io/acme/lib:2.0.0"}})
	e.push(t, component{name: "acme.org/app", version: "1.0.0",
		blobs:     []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "app")}},
		artifacts: map[string]string{"chart": "ghcr.io/acme/charts/app:1.0.0"},
		refs:      []ocm.ComponentReference{reference("lib", "acme.org/lib", "2.0.0")}})
	req := e.ref("acme.org/app", "1.0.0")
	cv, err := e.resolver(t, Options{}).Resolve(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := NewTemplating(cv)
	if err != nil {
		t.Fatal(err)
	}
	values, err := tm.Values(req.Definition)
	if err != nil {
		t.Fatal(err)
	}
	return tm, values, e
}

func render(t *testing.T, tm *Templating, values map[string]any, src string) (string, error) {
	t.Helper()
	tpl, err := template.New("t").Option("missingkey=error").Funcs(tm.FuncMap()).Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = tpl.Execute(&out, values)
	return out.String(), err
}

func TestTemplateInputsAndFunctions(t *testing.T) {
	tm, values, e := templating(t)
	cases := map[string]string{
		`{{ .cd.component.name }}`: "acme.org/app",
		`{{ len .components }} {{ (index .components 0).component.name }}`:                                                       "1 acme.org/lib",
		`{{ .componentDescriptorDef.ref.componentName }}`:                                                                        "acme.org/app",
		`{{ .componentDescriptorDef.ref.repositoryContext.type }}`:                                                               "OCIRegistry",
		`{{ (getResource .cd "name" "chart").access.imageReference }}`:                                                           "ghcr.io/acme/charts/app:1.0.0",
		`{{ (getResource .cd "name" "chart" "version" "1.0.0").relation }}`:                                                      "external",
		`{{ len (getResources .cd "version" "1.0.0") }}`:                                                                         "2",
		`{{ len (getResources .cd "name" "nothing") }}`:                                                                          "0",
		`{{ (getComponent .cd "name" "lib").component.version }}`:                                                                "2.0.0",
		`{{ $c := getComponent .cd "componentName" "acme.org/lib" }}{{ (getResource $c "name" "image").access.imageReference }}`: "ghcr.io/acme/lib:2.0.0",
		`{{ (getRepositoryContext .cd).baseUrl }}`:                                                                               e.host + "/ocm",
		`{{ parseOCIRef "host:5000/myrepo/myimage:1.0.0" }}`:                                                                     "[host:5000/myrepo/myimage 1.0.0]",
		`{{ ociRefRepo "host:5000/myrepo/myimage:1.0.0" }}`:                                                                      "host:5000/myrepo/myimage",
		`{{ ociRefVersion "host:5000/myrepo/myimage:1.0.0" }}`:                                                                   "1.0.0",
		`{{ ociRefVersion "nginx:0.30.0" }}`:                                                                                     "0.30.0",
		`{{ ociRefVersion "ghcr.io/a/b:1@sha256:0123" }} {{ ociRefRepo "ghcr.io/a/b:1@sha256:0123" }}`:                           "sha256:0123 ghcr.io/a/b",
	}
	for src, want := range cases {
		got, err := render(t, tm, values, src)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestTemplateValuesAreCopies(t *testing.T) {
	tm, values, _ := templating(t)
	cd := values["cd"].(map[string]any)
	cd["component"].(map[string]any)["name"] = "changed"
	again, err := tm.Values(lsv1alpha1.ComponentDescriptorDefinition{})
	if err != nil {
		t.Fatal(err)
	}
	if again["cd"].(map[string]any)["component"].(map[string]any)["name"] != "acme.org/app" {
		t.Error("a template's change to .cd is seen by the next template")
	}
}

func TestGetResourceKeyIdentifiesTheResource(t *testing.T) {
	tm, values, e := templating(t)
	key, err := render(t, tm, values, `{{ getResourceKey "cd://componentReferences/lib/resources/image" }}`)
	if err != nil {
		t.Fatal(err)
	}
	k, err := DecodeResourceKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if k.ComponentName != "acme.org/lib" || k.Version != "2.0.0" || k.Resource.Name != "image" ||
		k.RepositoryContext.BaseURL != "http://"+e.host+"/ocm" || k.RepositoryContext.Type != "OCIRegistry" {
		t.Errorf("key %+v", k)
	}
	if strings.ContainsAny(key, "+/=") {
		t.Errorf("key %q is not unpadded base64url", key)
	}
}

func TestTemplateFunctionErrorsSayWhatIsWrong(t *testing.T) {
	tm, values, _ := templating(t)
	cases := map[string][]string{
		`{{ getResource .cd "name" "nope" }}`:                               {"getResource: component acme.org/app:1.0.0 has no resource with name=nope"},
		`{{ getResource .cd "version" "1.0.0" }}`:                           {"has 2 resources with version=1.0.0", "give more of the identity"},
		`{{ getResource .cd "name" }}`:                                      {"key-value pairs", "odd number (1)"},
		`{{ getResource "x" "name" "a" }}`:                                  {"getResource: the first argument must be a component descriptor", "string"},
		`{{ getComponent .cd "name" "nope" }}`:                              {"getComponent: component acme.org/app:1.0.0 has 0 component references with name=nope"},
		`{{ getRepositoryContext .imports }}`:                               {"getRepositoryContext: the first argument has no component: not a component descriptor"},
		`{{ getResourceKey "cd://resources/nope" }}`:                        {"getResourceKey: cd://resources/nope", `resource "nope" of component acme.org/app:1.0.0 not found`},
		`{{ getResourceKey "cd://componentReferences/x/resources/chart" }}`: {`has no component reference "x"`},
		`{{ getResourceKey "chart" }}`:                                      {"getResourceKey", "must start with cd://"},
		`{{ parseOCIRef "ghcr.io/acme/app" }}`:                              {`parseOCIRef: "ghcr.io/acme/app" is not an OCI reference with a tag or digest`},
		`{{ ociRefVersion "" }}`:                                            {"parseOCIRef"},
	}
	values["imports"] = map[string]any{}
	for src, want := range cases {
		_, err := render(t, tm, values, src)
		wantErr(t, err, want...)
	}
}

func TestDecodeResourceKeyRefusesMalformedKeys(t *testing.T) {
	ok, err := EncodeResourceKey(ResourceKey{RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: "r.io"}, ComponentName: "a", Version: "1", Resource: ResourceIdentity{Name: "chart"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeResourceKey(ok); err != nil {
		t.Fatal(err)
	}
	noResource, _ := EncodeResourceKey(ResourceKey{RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "OCIRegistry"}, ComponentName: "a", Version: "1"})
	noVersion, _ := EncodeResourceKey(ResourceKey{RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "OCIRegistry"}, ComponentName: "a", Resource: ResourceIdentity{Name: "x"}})
	noRepo, _ := EncodeResourceKey(ResourceKey{ComponentName: "a", Version: "1", Resource: ResourceIdentity{Name: "x"}})
	for in, want := range map[string]string{
		"not base64!":               "not unpadded base64url",
		"bm90IGpzb24":               "does not hold a resource identity",
		noResource:                  "names no resource",
		noVersion:                   "names no component version",
		noRepo:                      "names no repository context",
		strings.Repeat("a", 20<<10): "more than a key can be",
	} {
		_, err := DecodeResourceKey(in)
		wantErr(t, err, want)
	}
}
