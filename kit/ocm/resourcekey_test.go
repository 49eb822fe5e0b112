package ocm

import (
	"strings"
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestResourceKeyRoundTrips(t *testing.T) {
	in := ResourceKey{
		RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: "r.io/ocm"},
		ComponentName:     "acme.org/app", Version: "1.0.0",
		Resource: ResourceIdentity{Name: "chart", ExtraIdentity: map[string]string{"arch": "amd64"}},
	}
	key, err := EncodeResourceKey(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(key, "=+/") {
		t.Fatalf("key %q is not unpadded base64url", key)
	}
	out, err := DecodeResourceKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if out.RepositoryContext.BaseURL != "r.io/ocm" || out.ComponentName != in.ComponentName || out.Version != in.Version ||
		out.Resource.Name != "chart" || out.Resource.ExtraIdentity["arch"] != "amd64" {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

func TestDecodeResourceKeyRefusesMalformedKeys(t *testing.T) {
	rc := &lsv1alpha1.RepositoryContext{Type: "OCIRegistry"}
	noResource, _ := EncodeResourceKey(ResourceKey{RepositoryContext: rc, ComponentName: "a", Version: "1"})
	noVersion, _ := EncodeResourceKey(ResourceKey{RepositoryContext: rc, ComponentName: "a", Resource: ResourceIdentity{Name: "x"}})
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
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeResourceKey(%.20q) = %v, want an error containing %q", in, err, want)
		}
	}
}
