package command

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/terrace-dev/terrace/kit/ocm"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// run runs terrace with args and no docker config; it returns stdout and
// the error printed.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Execute(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeChart(t *testing.T, dir string) {
	write(t, filepath.Join(dir, "Chart.yaml"), "apiVersion: v2\nname: echo\nversion: 0.3.0\n")
	write(t, filepath.Join(dir, "values.yaml"), "replicas: 1\n")
	write(t, filepath.Join(dir, "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\n")
	write(t, filepath.Join(dir, ".helmignore"), "*.bak\n")
	write(t, filepath.Join(dir, "notes.bak"), "ignored\n")
}

const constructorYAML = `components:
  - name: github.com/acme.org/landscape
    version: 1.2.0
    provider:
      name: acme.org
    labels:
      - name: team
        value: {owner: platform}
    sources:
      - name: repo
        type: git
        access:
          type: gitHub
          repoUrl: github.com/acme/landscape
          commit: 0123456789abcdef0123456789abcdef01234567
    componentReferences:
      - name: db
        componentName: github.com/acme.org/db
        version: 1.0.0
    resources:
      - name: blueprint
        type: blueprint
        input:
          type: dir
          path: ./blueprint
          compress: true
          mediaType: application/vnd.gardener.landscaper.blueprint.v1+tar+gzip
          excludeFiles: ["*.tmp"]
      - name: config
        type: plainText
        input:
          type: file
          path: ./config.txt
          mediaType: text/plain
      - name: chart
        type: helmChart
        input:
          type: helm
          path: ./chart
      - name: image
        type: ociImage
        version: 1.10.0
        access:
          type: ociArtifact
          imageReference: registry.example.com/echoserver:1.10
`

func TestComponentPushConstructorThenGet(t *testing.T) {
	host := registrytest.Start(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "component-constructor.yaml"), constructorYAML)
	write(t, filepath.Join(dir, "blueprint", "blueprint.yaml"), "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Blueprint\n")
	write(t, filepath.Join(dir, "blueprint", "scratch.tmp"), "excluded")
	write(t, filepath.Join(dir, "config.txt"), "hello")
	writeChart(t, filepath.Join(dir, "chart"))

	out, errOut, code := run(t, "component", "push", "--repo", host+"/ocm", "--plain-http", filepath.Join(dir, "component-constructor.yaml"))
	if code != 0 {
		t.Fatalf("push failed: %s", errOut)
	}
	if !strings.Contains(out, "pushed github.com/acme.org/landscape:1.2.0 to "+host+"/ocm") {
		t.Errorf("push output = %q", out)
	}

	out, errOut, code = run(t, "component", "get", "--plain-http", host+"/ocm//github.com/acme.org/landscape:1.2.0")
	if code != 0 {
		t.Fatalf("get failed: %s", errOut)
	}
	cd, err := ocm.Decode([]byte(out))
	if err != nil {
		t.Fatalf("get printed no descriptor: %v\n%s", err, out)
	}
	c := cd.Component
	if c.Provider.Name != "acme.org" || len(c.Sources) != 1 || len(c.References) != 1 || len(c.Labels) != 1 || string(c.Labels[0].Value) != `{"owner":"platform"}` {
		t.Fatalf("descriptor lost fields:\n%s", out)
	}

	repo := &ocm.Repository{Base: host + "/ocm", PlainHTTP: true}
	blueprint, mediaType := resourceContent(t, repo, cd, "blueprint")
	if mediaType != "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip" {
		t.Errorf("blueprint media type = %s", mediaType)
	}
	if files := tarFiles(t, blueprint, true); strings.Join(files, ",") != "blueprint.yaml" {
		t.Errorf("blueprint files = %v, want blueprint.yaml only (scratch.tmp excluded)", files)
	}
	if content, mt := resourceContent(t, repo, cd, "config"); string(content) != "hello" || mt != "text/plain" {
		t.Errorf("config = %q (%s)", content, mt)
	}
	chart, mt := resourceContent(t, repo, cd, "chart")
	if mt != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Errorf("chart media type = %s", mt)
	}
	if files := tarFiles(t, chart, true); strings.Join(files, ",") != "echo/.helmignore,echo/Chart.yaml,echo/templates/cm.yaml,echo/values.yaml" {
		t.Errorf("chart files = %v", files)
	}
	image, _ := cd.Resource("image", nil)
	if ref, err := image.Access.OCIArtifactReference(); err != nil || ref != "registry.example.com/echoserver:1.10" || image.Relation != ocm.RelationExternal {
		t.Errorf("image resource = %+v", image)
	}
	if res, _ := cd.Resource("blueprint", nil); res.Version != "1.2.0" || res.Relation != ocm.RelationLocal {
		t.Errorf("an input's resource = version %q relation %q, want the component's version and local", res.Version, res.Relation)
	}
}

func resourceContent(t *testing.T, repo *ocm.Repository, cd *ocm.ComponentDescriptor, name string) ([]byte, string) {
	t.Helper()
	res, err := cd.Resource(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, info, err := ocm.Blob(context.Background(), repo, cd, res)
	if err != nil {
		t.Fatalf("resource %s: %v", name, err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data, info.MediaType
}

// tarFiles lists the regular files of a (gzipped) tar, sorted.
func tarFiles(t *testing.T, data []byte, gzipped bool) []string {
	t.Helper()
	var r io.Reader = bytes.NewReader(data)
	if gzipped {
		gz, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("not gzip: %v", err)
		}
		r = gz
	}
	tr := tar.NewReader(r)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
		}
	}
	sort.Strings(files)
	return files
}

// A component archive laid out as Landscaper's documentation publishes
// them: a v2 descriptor naming its blobs by file, a blueprint directory.
const archiveDescriptor = `meta:
  schemaVersion: v2

component:
  name: github.com/gardener/landscaper/ingress-nginx
  version: v0.3.2
  provider: internal
  repositoryContexts:
  - type: ociRegistry
    baseUrl: eu.gcr.io/gardener-project/landscaper/tutorials/components
  sources: []
  componentReferences: []
  resources:
  - type: blueprint
    name: ingress-nginx-blueprint
    version: v0.3.2
    relation: local
    access:
      type: localFilesystemBlob
      mediaType: application/vnd.gardener.landscaper.blueprint.v1+tar+gzip
      filename: ingress-nginx-blueprint
  - type: helm
    name: ingress-nginx-chart
    version: 4.0.17
    relation: external
    access:
      type: ociRegistry
      imageReference: eu.gcr.io/gardener-project/landscaper/tutorials/charts/ingress-nginx:4.0.17
`

func TestComponentPushArchive(t *testing.T) {
	host := registrytest.Start(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "component-descriptor.yaml"), archiveDescriptor)
	write(t, filepath.Join(dir, "blobs", "ingress-nginx-blueprint", "blueprint.yaml"), "kind: Blueprint\n")

	if _, errOut, code := run(t, "component", "push", "--repo", "http://"+host+"/ocm", dir); code != 0 {
		t.Fatalf("push failed: %s", errOut)
	}
	repo := &ocm.Repository{Base: host + "/ocm", PlainHTTP: true}
	cd, err := ocm.Resolve(context.Background(), repo, "github.com/gardener/landscaper/ingress-nginx", "v0.3.2")
	if err != nil {
		t.Fatal(err)
	}
	res, _ := cd.Resource("ingress-nginx-blueprint", nil)
	if res.Access.Type != ocm.AccessTypeLocalBlob {
		t.Errorf("the blueprint's access is %s, want localBlob", res.Access.Type)
	}
	data, mt := resourceContent(t, repo, cd, "ingress-nginx-blueprint")
	if files := tarFiles(t, data, true); strings.Join(files, ",") != "blueprint.yaml" || mt != "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip" {
		t.Errorf("blueprint = %v (%s)", files, mt)
	}
	chart, _ := cd.Resource("ingress-nginx-chart", nil)
	if ref, err := chart.Access.OCIArtifactReference(); err != nil || !strings.HasSuffix(ref, "ingress-nginx:4.0.17") {
		t.Errorf("chart access = %v, %v", chart.Access, err)
	}
}

func TestChartPushThenPullWithOras(t *testing.T) {
	host := registrytest.Start(t)
	dir := t.TempDir()
	writeChart(t, dir)
	if _, errOut, code := run(t, "chart", "push", "--plain-http", dir, "oci://"+host+"/charts/echo"); code != 0 {
		t.Fatalf("chart push failed: %s", errOut)
	}
	r, err := remote.NewRepository(host + "/charts/echo")
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	ctx := context.Background()
	_, manifestData, err := oras.FetchBytes(ctx, r, "0.3.0", oras.DefaultFetchBytesOptions)
	if err != nil {
		t.Fatalf("the chart is not tagged with its version: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" || len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Fatalf("manifest = config %s, layers %+v", m.Config.MediaType, m.Layers)
	}
	_, config, err := oras.FetchBytes(ctx, r.Blobs(), m.Config.Digest.String(), oras.DefaultFetchBytesOptions)
	if err != nil || !strings.Contains(string(config), `"name":"echo"`) {
		t.Errorf("config = %s, %v", config, err)
	}
	_, layer, err := oras.FetchBytes(ctx, r.Blobs(), m.Layers[0].Digest.String(), oras.DefaultFetchBytesOptions)
	if err != nil {
		t.Fatal(err)
	}
	if files := tarFiles(t, layer, true); !contains(files, "echo/Chart.yaml") || contains(files, "echo/notes.bak") {
		t.Errorf("chart archive files = %v", files)
	}

	// A .tgz with a tag in the reference keeps that tag.
	tgz := filepath.Join(t.TempDir(), "echo-0.3.0.tgz")
	if err := os.WriteFile(tgz, layer, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "chart", "push", "--plain-http", tgz, host+"/charts/echo:stable"); code != 0 {
		t.Fatalf("chart push of a tgz failed: %s", errOut)
	}
	if _, err := r.Resolve(ctx, "stable"); err != nil {
		t.Errorf("the reference's tag was not used: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestMalformedConstructorNamesFileLineAndField(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources:\n      - name: r\n        type: blob\n        inptu: {type: file}\n", `constructor.yaml:8: field inptu not found`},
		{"missing input path", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources:\n      - name: r\n        type: blob\n        input:\n          type: file\n", `:9: components[0].resources[0].input.path: an input of type "file" needs a path`},
		{"missing file", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources:\n      - name: r\n        type: blob\n        input: {type: file, path: ./nothing.txt}\n", `:8: components[0].resources[0].input.path:`},
		{"no type", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources:\n      - name: r\n        access: {type: ociArtifact, imageReference: r.io/x:1}\n", `:6: components[0].resources[0].type: resource "r" needs a type`},
		{"bad component name", "components:\n  - name: NotAName\n    version: 1.0.0\n    provider: acme\n", `:2: components[0]: component descriptor: component.name "NotAName"`},
		{"missing version", "components:\n  - name: acme.org/a\n    provider: acme\n", `:2: components[0].version: component acme.org/a needs a version`},
		{"wrong type", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources: nope\n", `constructor.yaml:5: cannot unmarshal`},
		{"unknown input type", "components:\n  - name: acme.org/a\n    version: 1.0.0\n    provider: acme\n    resources:\n      - name: r\n        type: blob\n        input: {type: spiff, path: x}\n", `input.type: input type "spiff" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "constructor.yaml")
			write(t, path, tc.doc)
			_, errOut, code := run(t, "component", "push", "--repo", "127.0.0.1:1/ocm", "--plain-http", path)
			if code == 0 || !strings.Contains(errOut, path) || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, error %q; want one naming %s and containing %q", code, errOut, path, tc.want)
			}
		})
	}
}

func TestPlainHTTPOnlyForLoopback(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "c.yaml"), "name: acme.org/a\nversion: 1.0.0\nprovider: acme\n")
	_, errOut, code := run(t, "component", "push", "--repo", "registry.example.com/ocm", "--plain-http", filepath.Join(dir, "c.yaml"))
	if code == 0 || !strings.Contains(errOut, "loopback registries only") || !strings.Contains(errOut, "registry.example.com") {
		t.Fatalf("exit %d, error %q; want plain HTTP refused for a remote host", code, errOut)
	}
}

func TestGetReportsMissingVersionAndBadReference(t *testing.T) {
	host := registrytest.Start(t)
	_, errOut, code := run(t, "component", "get", "--plain-http", host+"/ocm//acme.org/none:1.0.0")
	if code == 0 || !strings.Contains(errOut, "component version acme.org/none:1.0.0 in "+host+"/ocm not found") {
		t.Fatalf("exit %d, error %q", code, errOut)
	}
	_, errOut, code = run(t, "component", "get", host+"/ocm/acme.org/none:1.0.0")
	if code == 0 || !strings.Contains(errOut, "<baseUrl>//<component name>:<version>") {
		t.Fatalf("exit %d, error %q", code, errOut)
	}
}
