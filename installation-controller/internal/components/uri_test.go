package components

import (
	"context"
	"strings"
	"testing"

	"github.com/terrace-dev/terrace/kit/ocm"
)

func TestParseURI(t *testing.T) {
	good := map[string]URI{
		"cd://resources/blueprint":                                             {Resource: "blueprint"},
		"cd://componentReferences/ingress/resources/blueprint":                 {References: []string{"ingress"}, Resource: "blueprint"},
		"cd://componentReferences/a/componentReferences/b/resources/blueprint": {References: []string{"a", "b"}, Resource: "blueprint"},
	}
	for in, want := range good {
		got, err := ParseURI(in)
		if err != nil || strings.Join(got.References, "/") != strings.Join(want.References, "/") || got.Resource != want.Resource {
			t.Errorf("ParseURI(%q) = %+v, %v", in, got, err)
		}
		if got.String() != in {
			t.Errorf("%q written back as %q", in, got.String())
		}
	}
	bad := map[string]string{
		"resources/blueprint":                         "must start with cd://",
		"cd://componentReferences/a":                  "names no resource",
		"cd://resources/":                             `"resources" must be followed by a name`,
		"cd://resources/a/componentReferences/b":      "resources/<name> must end the URI",
		"cd://sources/a":                              `"sources" is neither componentReferences nor resources`,
		"cd://componentReferences//resources/x":       `"componentReferences" must be followed by a name`,
		"cd://componentReferences/a/resources/b/more": "resources/<name> must end the URI",
	}
	for in, want := range bad {
		_, err := ParseURI(in)
		wantErr(t, err, want)
	}
}

func TestBlueprintByURIFollowsNestedReferences(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.push(t, component{name: "acme.org/ingress", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "ingress")}}})
	e.push(t, component{name: "acme.org/network", version: "1.0.0", refs: []ocm.ComponentReference{reference("ingress", "acme.org/ingress", "1.0.0")},
		blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "network")}}})
	e.push(t, component{name: "acme.org/landscape", version: "1.0.0", refs: []ocm.ComponentReference{reference("net", "acme.org/network", "1.0.0")}})
	r := e.resolver(t, Options{})
	cv, err := r.Resolve(ctx, e.ref("acme.org/landscape", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	bp, err := r.BlueprintByURI(ctx, cv, cv.Root, "cd://componentReferences/net/componentReferences/ingress/resources/blueprint")
	if err != nil || !strings.Contains(bp.Files["blueprint.yaml"], "ingress") || bp.Component != "acme.org/ingress:1.0.0" {
		t.Fatalf("blueprint %+v, %v", bp, err)
	}
	// A sub-installation's own blueprint URIs are relative to its component.
	network := cv.Components["acme.org/network:1.0.0"]
	bp, err = r.BlueprintByURI(ctx, cv, network, "cd://resources/blueprint")
	if err != nil || !strings.Contains(bp.Files["blueprint.yaml"], "network") {
		t.Fatalf("blueprint %+v, %v", bp, err)
	}

	_, err = r.BlueprintByURI(ctx, cv, cv.Root, "cd://componentReferences/nope/resources/blueprint")
	wantErr(t, err, "blueprint.ref", `component acme.org/landscape:1.0.0 has no component reference "nope"`)
	_, err = r.BlueprintByURI(ctx, cv, cv.Root, "cd://componentReferences/net/resources/chart")
	wantErr(t, err, "blueprint.ref", `resource "chart" of component acme.org/network:1.0.0 not found`)
	_, err = r.BlueprintByURI(ctx, cv, cv.Root, "cd:/resources/x")
	wantErr(t, err, "blueprint.ref", "must start with cd://")
}
