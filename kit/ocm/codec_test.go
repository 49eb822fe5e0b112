package ocm

import (
	"encoding/json"
	"strings"
	"testing"
)

// A v2 descriptor shaped as the specification's examples.
const v2Example = `
meta:
  schemaVersion: v2
component:
  name: github.com/acme.org/helloworld
  version: 1.0.0+build.7
  provider: acme.org
  labels:
    - name: link-to-documentation
      value: https://acme.org/docs
  repositoryContexts:
    - baseUrl: ghcr.io
      componentNameMapping: urlPath
      subPath: acme/ocm
      type: OCIRegistry
  resources:
    - name: chart
      relation: local
      type: helmChart
      version: 1.0.0+build.7
      access:
        type: localBlob
        localReference: sha256:7acd701465611ed8a45d7889b4f3f6ed5e1450ca446f90fd6406cc59ea2baea8
        mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
        referenceName: acme.org/helloworld/chart:1.0.0
        globalAccess:
          type: ociBlob
          ref: ghcr.io/acme/ocm/component-descriptors/github.com/acme.org/helloworld
          digest: sha256:7acd701465611ed8a45d7889b4f3f6ed5e1450ca446f90fd6406cc59ea2baea8
          mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
          size: 47575040
    - name: image
      relation: external
      type: ociImage
      version: "1.10"
      extraIdentity:
        architecture: amd64
      access:
        type: ociArtifact
        imageReference: gcr.io/google_containers/echoserver:1.10
      digest:
        hashAlgorithm: SHA-256
        normalisationAlgorithm: ociArtifactDigest/v1
        value: efa2b9980ca2de65dc5a0c8cc05638b1a4b4ce8f6972dc08d0e805e5563ba5bb
  sources:
    - name: src
      type: git
      version: 1.0.0
      access:
        type: gitHub
        repoUrl: github.com/acme/helloworld
        commit: 727513969553bfcc603e1c0ae1a75d79e4132b58
  componentReferences:
    - name: db
      componentName: acme.org/postgres
      version: 14.5.0
`

// The same component version in ocm.software/v3alpha1.
const v3Example = `
apiVersion: ocm.software/v3alpha1
kind: ComponentVersion
metadata:
  name: github.com/acme.org/helloworld
  version: 1.0.0+build.7
  provider:
    name: acme.org
  labels:
    - name: link-to-documentation
      value: https://acme.org/docs
repositoryContexts:
  - baseUrl: ghcr.io
    componentNameMapping: urlPath
    subPath: acme/ocm
    type: OCIRegistry
spec:
  resources:
    - name: chart
      relation: local
      type: helmChart
      version: 1.0.0+build.7
      access:
        type: localBlob
        localReference: sha256:7acd701465611ed8a45d7889b4f3f6ed5e1450ca446f90fd6406cc59ea2baea8
        mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
        referenceName: acme.org/helloworld/chart:1.0.0
        globalAccess:
          type: ociBlob
          ref: ghcr.io/acme/ocm/component-descriptors/github.com/acme.org/helloworld
          digest: sha256:7acd701465611ed8a45d7889b4f3f6ed5e1450ca446f90fd6406cc59ea2baea8
          mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
          size: 47575040
    - name: image
      relation: external
      type: ociImage
      version: "1.10"
      extraIdentity:
        architecture: amd64
      access:
        type: ociArtifact
        imageReference: gcr.io/google_containers/echoserver:1.10
      digest:
        hashAlgorithm: SHA-256
        normalisationAlgorithm: ociArtifactDigest/v1
        value: efa2b9980ca2de65dc5a0c8cc05638b1a4b4ce8f6972dc08d0e805e5563ba5bb
  sources:
    - name: src
      type: git
      version: 1.0.0
      access:
        type: gitHub
        repoUrl: github.com/acme/helloworld
        commit: 727513969553bfcc603e1c0ae1a75d79e4132b58
  references:
    - name: db
      componentName: acme.org/postgres
      version: 14.5.0
`

func TestDecodeV2AndV3Alpha1GiveOneModel(t *testing.T) {
	v2, err := Decode([]byte(v2Example))
	if err != nil {
		t.Fatalf("decoding v2: %v", err)
	}
	v3, err := Decode([]byte(v3Example))
	if err != nil {
		t.Fatalf("decoding v3alpha1: %v", err)
	}
	a, _ := EncodeV2JSON(v2)
	b, _ := EncodeV2JSON(v3)
	if string(a) != string(b) {
		t.Fatalf("v2 and v3alpha1 decode differently:\nv2: %s\nv3: %s", a, b)
	}

	c := v2.Component
	if c.Name != "github.com/acme.org/helloworld" || c.Version != "1.0.0+build.7" || c.Provider.Name != "acme.org" {
		t.Errorf("component identity = %s:%s by %q", c.Name, c.Version, c.Provider.Name)
	}
	chart, err := v2.Resource("chart", nil)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := chart.Access.LocalBlob()
	if err != nil {
		t.Fatal(err)
	}
	if lb.LocalReference != "sha256:7acd701465611ed8a45d7889b4f3f6ed5e1450ca446f90fd6406cc59ea2baea8" ||
		lb.MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" || lb.ReferenceName != "acme.org/helloworld/chart:1.0.0" || lb.GlobalAccess["type"] != "ociBlob" {
		t.Errorf("local blob access = %+v", lb)
	}
	image, err := v2.Resource("image", map[string]string{"architecture": "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if ref, err := image.Access.OCIArtifactReference(); err != nil || ref != "gcr.io/google_containers/echoserver:1.10" {
		t.Errorf("image reference = %q, %v", ref, err)
	}
	if _, err := v2.Resource("image", map[string]string{"architecture": "arm64"}); err == nil {
		t.Error("a resource with another extra identity was found")
	}
	if ref, err := v2.Reference("db"); err != nil || ref.ComponentName != "acme.org/postgres" || ref.Version != "14.5.0" {
		t.Errorf("reference db = %+v, %v", ref, err)
	}
	if len(c.Labels) != 1 || string(c.Labels[0].Value) != `"https://acme.org/docs"` {
		t.Errorf("labels = %+v", c.Labels)
	}
}

func TestEncodeV2RoundTripsAndKeepsUnknownAccessFields(t *testing.T) {
	cd, err := Decode([]byte(v3Example))
	if err != nil {
		t.Fatal(err)
	}
	out, err := EncodeV2(cd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "schemaVersion: v2") || !strings.Contains(string(out), "componentReferences:") {
		t.Fatalf("encoded descriptor is not v2:\n%s", out)
	}
	again, err := Decode(out)
	if err != nil {
		t.Fatalf("decoding the encoded descriptor: %v\n%s", err, out)
	}
	src := again.Component.Sources[0].Access
	if src.Type != "gitHub" || src.Fields["commit"] != "727513969553bfcc603e1c0ae1a75d79e4132b58" {
		t.Errorf("unknown access type lost fields: %+v", src)
	}
	size := again.Component.Resources[0].Access.Fields["globalAccess"].(map[string]any)["size"]
	if size != float64(47575040) {
		t.Errorf("globalAccess.size = %v", size)
	}
	if !strings.Contains(string(out), "size: 47575040") {
		t.Errorf("a large number is not written as an integer:\n%s", out)
	}
}

func TestProviderForms(t *testing.T) {
	for _, tc := range []struct{ in, name, label string }{
		{`"acme.org"`, "acme.org", ""},
		{`{"name":"acme.org","labels":[{"name":"team","value":"a"}]}`, "acme.org", "team"},
		{`"{\"name\":\"acme.org\",\"labels\":[{\"name\":\"team\",\"value\":\"a\"}]}"`, "acme.org", "team"},
	} {
		var p Provider
		if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if p.Name != tc.name || (tc.label != "" && (len(p.Labels) != 1 || p.Labels[0].Name != tc.label)) {
			t.Errorf("%s decoded as %+v", tc.in, p)
		}
		out, _ := json.Marshal(p)
		var back Provider
		if err := json.Unmarshal(out, &back); err != nil || back.Name != p.Name || len(back.Labels) != len(p.Labels) {
			t.Errorf("%s does not round-trip: %s", tc.in, out)
		}
	}
}

func TestLegacyAccessTypes(t *testing.T) {
	var local Access
	if err := json.Unmarshal([]byte(`{"type":"localOciBlob","digest":"sha256:abc"}`), &local); err != nil {
		t.Fatal(err)
	}
	if lb, err := local.LocalBlob(); err != nil || lb.LocalReference != "sha256:abc" {
		t.Errorf("localOciBlob = %+v, %v", lb, err)
	}
	var oci Access
	if err := json.Unmarshal([]byte(`{"type":"ociRegistry/v1","imageReference":"r.io/a:1"}`), &oci); err != nil {
		t.Fatal(err)
	}
	if ref, err := oci.OCIArtifactReference(); err != nil || ref != "r.io/a:1" {
		t.Errorf("ociRegistry = %q, %v", ref, err)
	}
}

func TestDecodeRejectsInvalidDescriptors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"no schema", "component: {name: a}", "neither meta.schemaVersion nor apiVersion"},
		{"unknown schema version", "meta: {schemaVersion: v1}\ncomponent: {}", `meta.schemaVersion "v1"`},
		{"unknown apiVersion", "apiVersion: example.com/v1\nkind: ComponentVersion", `apiVersion "example.com/v1"`},
		{"bad name", "meta: {schemaVersion: v2}\ncomponent: {name: NotAName, version: 1.0.0, provider: x}", `component.name "NotAName"`},
		{"bad version", "meta: {schemaVersion: v2}\ncomponent: {name: acme.org/a, version: latest, provider: x}", `component.version "latest"`},
		{"resource without access", "meta: {schemaVersion: v2}\ncomponent: {name: acme.org/a, version: 1.0.0, provider: x, resources: [{name: r, type: blob}]}", "component.resources[0]"},
		{"access without type", "meta: {schemaVersion: v2}\ncomponent: {name: acme.org/a, version: 1.0.0, provider: x, resources: [{name: r, type: blob, access: {localReference: x}}]}", "access has no type"},
		{"duplicate resource", "meta: {schemaVersion: v2}\ncomponent: {name: acme.org/a, version: 1.0.0, provider: x, resources: [{name: r, type: blob, access: {type: none}}, {name: r, type: blob, access: {type: none}}]}", "a second resource"},
		{"reference without version", "meta: {schemaVersion: v2}\ncomponent: {name: acme.org/a, version: 1.0.0, provider: x, componentReferences: [{name: r, componentName: acme.org/b}]}", "componentReferences[0]"},
		{"not yaml", "meta: [", "not YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestVersionTagMapping(t *testing.T) {
	for version, tag := range map[string]string{
		"1.2.3":             "1.2.3",
		"1.2.3+meta":        "1.2.3.build-meta",
		"1.2.3-alpha+ci.42": "1.2.3-alpha.build-ci.42",
	} {
		if got := VersionToTag(version); got != tag {
			t.Errorf("VersionToTag(%q) = %q, want %q", version, got, tag)
		}
		if got := TagToVersion(tag); got != version {
			t.Errorf("TagToVersion(%q) = %q, want %q", tag, got, version)
		}
	}
}
