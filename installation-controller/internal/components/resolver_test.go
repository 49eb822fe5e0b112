package components

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
)

func keys(cv *ComponentVersion) string {
	out := make([]string, 0, len(cv.Components))
	for k := range cv.Components {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestResolveFollowsReferencesTransitively(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/leaf", version: "1.0.0"})
	e.push(t, component{name: "acme.org/mid", version: "1.0.0", refs: []ocm.ComponentReference{reference("leaf", "acme.org/leaf", "1.0.0")}})
	rootDigest := e.push(t, component{name: "acme.org/root", version: "1.0.0", refs: []ocm.ComponentReference{
		reference("mid", "acme.org/mid", "1.0.0"), reference("leaf-too", "acme.org/leaf", "1.0.0"),
	}})
	cv, err := e.resolver(t, Options{}).Resolve(context.Background(), e.ref("acme.org/root", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(cv); got != "acme.org/leaf:1.0.0,acme.org/mid:1.0.0,acme.org/root:1.0.0" {
		t.Errorf("resolved %s", got)
	}
	if cv.Root.Digest != rootDigest {
		t.Errorf("root digest %s, want the pushed manifest's %s", cv.Root.Digest, rootDigest)
	}
}

func TestResolveTakesTheContextsRepositoryWhenTheRefHasNone(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/app", version: "1.0.0"})
	req := e.ref("acme.org/app", "1.0.0")
	req.Definition.Reference.RepositoryContext = nil
	req.RepositoryContext = e.rc
	if _, err := e.resolver(t, Options{}).Resolve(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.RepositoryContext = nil
	_, err := e.resolver(t, Options{}).Resolve(context.Background(), req)
	wantErr(t, err, "acme.org/app:1.0.0", "no repository context", "spec.componentDescriptor.ref.repositoryContext")
}

func TestOverwritesApplyInOrderToRootAndReferences(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/lib", version: "2.0.0"})
	e.push(t, component{name: "acme.org/app", version: "2.0.0", refs: []ocm.ComponentReference{reference("lib", "acme.org/lib", "1.0.0")}})
	req := e.ref("acme.org/app", "1.0.0") // 1.0.0 of neither exists
	req.Overwrites = []lsv1alpha1.ComponentVersionOverwrite{
		{Source: lsv1alpha1.ComponentVersionOverwriteReference{ComponentName: "acme.org/app", RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "ociRegistry", BaseURL: e.host + "/ocm/"}},
			Substitution: lsv1alpha1.ComponentVersionOverwriteReference{Version: "2.0.0"}},
		// The version is already replaced: this one is skipped whole.
		{Source: lsv1alpha1.ComponentVersionOverwriteReference{ComponentName: "acme.org/app"},
			Substitution: lsv1alpha1.ComponentVersionOverwriteReference{ComponentName: "acme.org/other", Version: "9.9.9"}},
		{Source: lsv1alpha1.ComponentVersionOverwriteReference{ComponentName: "acme.org/lib", Version: "1.0.0"},
			Substitution: lsv1alpha1.ComponentVersionOverwriteReference{Version: "2.0.0"}},
	}
	cv, err := e.resolver(t, Options{}).Resolve(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(cv); got != "acme.org/app:2.0.0,acme.org/lib:2.0.0" {
		t.Errorf("resolved %s", got)
	}
	if len(cv.Overwritten) != 2 || !strings.Contains(cv.Overwritten[0], "acme.org/app:1.0.0 in http://"+e.host+"/ocm -> acme.org/app:2.0.0") {
		t.Errorf("overwrites recorded: %q", cv.Overwritten)
	}
}

func TestResolveInlineDescriptorReadsItsReferencesFromTheContext(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/lib", version: "1.0.0"})
	inline := `{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/inline","version":"0.1.0","provider":"acme.org",
	  "repositoryContexts":[],"sources":[],"resources":[],
	  "componentReferences":[{"name":"lib","componentName":"acme.org/lib","version":"1.0.0"}]}}`
	any := lsv1alpha1.NewAnyJSON([]byte(inline))
	req := Request{Definition: lsv1alpha1.ComponentDescriptorDefinition{Inline: &any}, RepositoryContext: e.rc}
	cv, err := e.resolver(t, Options{}).Resolve(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(cv); got != "acme.org/inline:0.1.0,acme.org/lib:1.0.0" || cv.Root.Digest != "" {
		t.Errorf("resolved %s, root digest %q", got, cv.Root.Digest)
	}
	req.RepositoryContext = nil
	_, err = e.resolver(t, Options{}).Resolve(context.Background(), req)
	wantErr(t, err, `component reference "lib" of acme.org/inline:0.1.0`, "no repository context")

	bad := lsv1alpha1.NewAnyJSON([]byte(`{"meta":{"schemaVersion":"v9"}}`))
	_, err = e.resolver(t, Options{}).Resolve(context.Background(), Request{Definition: lsv1alpha1.ComponentDescriptorDefinition{Inline: &bad}})
	wantErr(t, err, "spec.componentDescriptor.inline is not a component descriptor")
}

func TestResolveErrorsNameTheComponentAndTheReason(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/a", version: "1.0.0", refs: []ocm.ComponentReference{reference("missing", "acme.org/gone", "1.0.0")}})
	e.push(t, component{name: "acme.org/x", version: "1.0.0", refs: []ocm.ComponentReference{reference("y", "acme.org/y", "1.0.0")}})
	e.push(t, component{name: "acme.org/y", version: "1.0.0", refs: []ocm.ComponentReference{reference("x", "acme.org/x", "1.0.0")}})
	r := e.resolver(t, Options{})
	ctx := context.Background()

	_, err := r.Resolve(ctx, e.ref("acme.org/nope", "1.0.0"))
	wantErr(t, err, "component version acme.org/nope:1.0.0", e.host+"/ocm", "not found")
	_, err = r.Resolve(ctx, e.ref("acme.org/a", "1.0.0"))
	wantErr(t, err, `component reference "missing" of acme.org/a:1.0.0`, "acme.org/gone:1.0.0", "not found")
	_, err = r.Resolve(ctx, e.ref("acme.org/x", "1.0.0"))
	wantErr(t, err, "cycle", "acme.org/x:1.0.0 -> acme.org/y:1.0.0 -> acme.org/x:1.0.0")

	req := e.ref("acme.org/a", "1.0.0")
	req.Definition.Reference.RepositoryContext = &lsv1alpha1.RepositoryContext{Type: "CommonTransportFormat", Extra: map[string]lsv1alpha1.AnyJSON{"filePath": lsv1alpha1.NewAnyJSON([]byte(`"/x"`))}}
	_, err = r.Resolve(ctx, req)
	wantErr(t, err, "acme.org/a:1.0.0", `repository context of type "CommonTransportFormat" is not supported`)

	req = e.ref("acme.org/a", "1.0.0")
	req.PullSecrets = map[string][]byte{"registry-creds": []byte("not json")}
	_, err = r.Resolve(ctx, req)
	wantErr(t, err, `registry pull secret "registry-creds"`, "not a docker config JSON")

	_, err = r.Resolve(ctx, Request{})
	wantErr(t, err, "spec.componentDescriptor", "neither ref nor inline")
}

func TestReferenceDepthAndCountAreBounded(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/c", version: "1"})
	e.push(t, component{name: "acme.org/b", version: "1", refs: []ocm.ComponentReference{reference("c", "acme.org/c", "1")}})
	e.push(t, component{name: "acme.org/a", version: "1", refs: []ocm.ComponentReference{reference("b", "acme.org/b", "1")}})
	_, err := e.resolver(t, Options{Limits: ocm.Limits{MaxReferenceDepth: 1}}).Resolve(context.Background(), e.ref("acme.org/a", "1"))
	wantErr(t, err, "nested deeper than 1", "--ocm-max-reference-depth")
	_, err = e.resolver(t, Options{Limits: ocm.Limits{MaxComponents: 2}}).Resolve(context.Background(), e.ref("acme.org/a", "1"))
	wantErr(t, err, "more than 2 component versions", "--ocm-max-components")
}

func TestRepositoryContextKeepsUnknownFields(t *testing.T) {
	in := `{"type":"OCIRegistry","baseUrl":"ghcr.io/acme","componentNameMapping":"urlPath","x":{"y":1}}`
	var rc lsv1alpha1.RepositoryContext
	if err := json.Unmarshal([]byte(in), &rc); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	_ = json.Unmarshal([]byte(in), &a)
	_ = json.Unmarshal(out, &b)
	if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
		t.Errorf("round trip changed the context: %s -> %s", ja, jb)
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
