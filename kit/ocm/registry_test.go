package ocm

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/terrace-dev/terrace/kit/registrytest"
)

func testRepository(t *testing.T) *Repository {
	t.Helper()
	return &Repository{Base: registrytest.Start(t) + "/landscapes", PlainHTTP: true}
}

// descriptorWithBlob is a component version with one local blob and one
// OCI artifact resource.
func descriptorWithBlob(name, version string, blob []byte, imageRef string) *ComponentDescriptor {
	cd := &ComponentDescriptor{Meta: Meta{SchemaVersion: SchemaVersionV2}, Component: Component{
		Name: name, Version: version, Provider: Provider{Name: "acme.org"},
		Resources: []Resource{{
			ElementMeta: ElementMeta{Name: "blueprint", Version: version},
			Type:        "blueprint", Relation: RelationLocal,
			Access: NewLocalBlobAccess(LocalBlobAccess{LocalReference: digest.FromBytes(blob).String(), MediaType: "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip"}),
		}},
	}}
	if imageRef != "" {
		cd.Component.Resources = append(cd.Component.Resources, Resource{
			ElementMeta: ElementMeta{Name: "chart", Version: "1.0.0"}, Type: "helmChart", Relation: RelationExternal,
			Access: NewOCIArtifactAccess(imageRef),
		})
	}
	return cd
}

func readBlob(t *testing.T, repo *Repository, cd *ComponentDescriptor, name string) ([]byte, BlobInfo) {
	t.Helper()
	res, err := cd.Resource(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, info, err := Blob(context.Background(), repo, cd, res)
	if err != nil {
		t.Fatalf("opening resource %s: %v", name, err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading resource %s: %v", name, err)
	}
	return data, info
}

func TestPushResolveBlobRoundTrip(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	chart := []byte("a chart archive")
	chartRef := pushSingleLayerArtifact(t, repo.Host()+"/charts/echo", "1.0.0", "application/vnd.cncf.helm.chart.content.v1.tar+gzip", chart)

	blob := []byte("a blueprint archive")
	cd := descriptorWithBlob("github.com/acme.org/app", "1.0.0+build.3", blob, chartRef)
	if _, err := Push(ctx, repo, cd, []LocalBlob{BytesBlob("application/octet-stream", blob)}); err != nil {
		t.Fatalf("push: %v", err)
	}

	got, err := Resolve(ctx, repo, "github.com/acme.org/app", "1.0.0+build.3")
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if got.Key() != "github.com/acme.org/app:1.0.0+build.3" || len(got.Component.Resources) != 2 {
		t.Fatalf("resolved %s with %d resources", got.Key(), len(got.Component.Resources))
	}
	last := got.Component.RepositoryContexts[len(got.Component.RepositoryContexts)-1]
	if last.BaseURL != repo.Base || last.Type != "OCIRegistry" {
		t.Errorf("last repository context = %+v, want the repository pushed to", last)
	}
	data, info := readBlob(t, repo, got, "blueprint")
	if !bytes.Equal(data, blob) || info.MediaType != "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip" {
		t.Errorf("local blob = %q (%s)", data, info.MediaType)
	}
	data, info = readBlob(t, repo, got, "chart")
	if !bytes.Equal(data, chart) || info.MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Errorf("OCI artifact content = %q (%s)", data, info.MediaType)
	}
}

// TestPushedLayoutMatchesSpecification reads what Push wrote with a plain
// OCI client and checks it against the OCM OCI mapping.
func TestPushedLayoutMatchesSpecification(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	blob := []byte("blueprint")
	if _, err := Push(ctx, repo, descriptorWithBlob("github.com/acme.org/app", "2.0.0+ci", blob, ""), []LocalBlob{BytesBlob("x", blob)}); err != nil {
		t.Fatal(err)
	}
	r, err := remote.NewRepository(repo.Base + "/component-descriptors/github.com/acme.org/app")
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	desc, manifestData, err := oras.FetchBytes(ctx, r, "2.0.0.build-ci", oras.DefaultFetchBytesOptions)
	if err != nil {
		t.Fatalf("the version is not tagged 2.0.0.build-ci: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest || m.Config.MediaType != MediaTypeComponentConfig {
		t.Fatalf("manifest %s with config %s", desc.MediaType, m.Config.MediaType)
	}
	if len(m.Layers) != 2 || m.Layers[0].MediaType != MediaTypeComponentDescriptorTar || m.Layers[1].Digest != digest.FromBytes(blob) ||
		m.Layers[1].MediaType != "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip" {
		t.Fatalf("layers = %+v", m.Layers)
	}
	var cfg ComponentConfig
	if _, cfgData, err := oras.FetchBytes(ctx, r.Blobs(), m.Config.Digest.String(), oras.DefaultFetchBytesOptions); err != nil || json.Unmarshal(cfgData, &cfg) != nil {
		t.Fatalf("config: %v", err)
	}
	if cfg.ComponentDescriptorLayer == nil || cfg.ComponentDescriptorLayer.Digest != m.Layers[0].Digest {
		t.Fatalf("config's componentDescriptorLayer = %+v, layer 0 = %s", cfg.ComponentDescriptorLayer, m.Layers[0].Digest)
	}
	_, layer, err := oras.FetchBytes(ctx, r.Blobs(), m.Layers[0].Digest.String(), oras.DefaultFetchBytesOptions)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(layer))
	h, err := tr.Next()
	if err != nil || h.Name != "component-descriptor.yaml" {
		t.Fatalf("first tar entry = %v, %v", h, err)
	}
	yamlData, _ := io.ReadAll(tr)
	if !strings.HasPrefix(string(yamlData), "component:") || !strings.Contains(string(yamlData), "schemaVersion: v2") {
		t.Errorf("component-descriptor.yaml is not a v2 descriptor:\n%s", yamlData)
	}
}

// TestReadsHandBuiltComponentVersion reads a component version laid out by
// hand from the specification: a descriptor layer of plain JSON media type,
// the config naming it, a text blob.
func TestReadsHandBuiltComponentVersion(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	r, err := remote.NewRepository(repo.Base + "/component-descriptors/github.com/acme.org/helloworld")
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	text := []byte("hello\n")
	descJSON := fmt.Sprintf(`{"meta":{"schemaVersion":"v2"},"component":{"name":"github.com/acme.org/helloworld","version":"1.0.0","provider":"acme.org","repositoryContexts":[],"resources":[{"name":"blob","version":"1.0.0","type":"plainText","relation":"local","access":{"type":"localBlob","localReference":"%s","mediaType":"text/plain"}}],"sources":[],"componentReferences":[]}}`, digest.FromBytes(text))
	descLayer := mustPush(t, r, MediaTypeComponentDescriptorJSON, []byte(descJSON))
	textLayer := mustPush(t, r, "text/plain", text)
	config := mustPush(t, r, MediaTypeComponentConfig, []byte(fmt.Sprintf(`{"componentDescriptorLayer":{"mediaType":%q,"digest":%q,"size":%d}}`, descLayer.MediaType, descLayer.Digest, descLayer.Size)))
	manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.ocm.software.component-descriptor.v2","config":{"mediaType":%q,"digest":%q,"size":%d},"layers":[{"mediaType":%q,"digest":%q,"size":%d},{"mediaType":"text/plain","digest":%q,"size":%d}]}`,
		config.MediaType, config.Digest, config.Size, descLayer.MediaType, descLayer.Digest, descLayer.Size, textLayer.Digest, textLayer.Size)
	if _, err := oras.TagBytes(ctx, r, ocispec.MediaTypeImageManifest, []byte(manifest), "1.0.0"); err != nil {
		t.Fatal(err)
	}

	cd, err := Resolve(ctx, repo, "github.com/acme.org/helloworld", "1.0.0")
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	data, info := readBlob(t, repo, cd, "blob")
	if string(data) != "hello\n" || info.MediaType != "text/plain" {
		t.Errorf("blob = %q (%s)", data, info.MediaType)
	}
}

func mustPush(t *testing.T, r *remote.Repository, mediaType string, data []byte) ocispec.Descriptor {
	t.Helper()
	desc, err := oras.PushBytes(context.Background(), r, mediaType, data)
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

func pushSingleLayerArtifact(t *testing.T, repoName, tag, mediaType string, data []byte) string {
	t.Helper()
	ctx := context.Background()
	r, err := remote.NewRepository(repoName)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	layer := mustPush(t, r, mediaType, data)
	cfg := mustPush(t, r, "application/vnd.cncf.helm.config.v1+json", []byte(`{"name":"echo","version":"1.0.0"}`))
	m, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{ConfigDescriptor: &cfg, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Tag(ctx, m, tag); err != nil {
		t.Fatal(err)
	}
	return repoName + ":" + tag
}

func TestResolveErrorsNameWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	_, err := Resolve(ctx, repo, "github.com/acme.org/none", "1.0.0")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "github.com/acme.org/none:1.0.0") || !strings.Contains(err.Error(), repo.Base) {
		t.Fatalf("error = %v, want a NotFoundError naming the version and repository", err)
	}

	blob := []byte("x")
	cd := descriptorWithBlob("github.com/acme.org/app", "1.0.0", blob, repo.Host()+"/charts/missing:1.0.0")
	if _, err := Push(ctx, repo, cd, []LocalBlob{BytesBlob("x", blob)}); err != nil {
		t.Fatal(err)
	}
	res, _ := cd.Resource("chart", nil)
	_, _, err = Blob(ctx, repo, cd, res)
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), `resource "chart"`) || !strings.Contains(err.Error(), "charts/missing") {
		t.Fatalf("error = %v, want a NotFoundError naming the resource and artifact", err)
	}
	if _, err := cd.Resource("nothing", nil); !errors.As(err, &nf) {
		t.Fatalf("error = %v, want NotFoundError", err)
	}
}

func TestPushRefusesLocalBlobWithoutContent(t *testing.T) {
	repo := testRepository(t)
	cd := descriptorWithBlob("github.com/acme.org/app", "1.0.0", []byte("x"), "")
	_, err := Push(context.Background(), repo, cd, nil)
	if err == nil || !strings.Contains(err.Error(), `resource "blueprint"`) {
		t.Fatalf("error = %v, want one naming the resource without content", err)
	}
}

func TestLimitsAreEnforcedAndNamed(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	blob := bytes.Repeat([]byte("b"), 4096)
	cd := descriptorWithBlob("github.com/acme.org/app", "1.0.0", blob, "")
	if _, err := Push(ctx, repo, cd, []LocalBlob{BytesBlob("x", blob)}); err != nil {
		t.Fatal(err)
	}
	small := *repo
	small.Limits.MaxBlobBytes = 1024
	res, _ := cd.Resource("blueprint", nil)
	_, _, err := Blob(ctx, &small, cd, res)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "--ocm-max-blob-bytes") {
		t.Fatalf("error = %v, want a TooLargeError naming --ocm-max-blob-bytes", err)
	}
	tiny := *repo
	tiny.Limits.MaxDescriptorBytes = 200
	_, err = Resolve(ctx, &tiny, "github.com/acme.org/app", "1.0.0")
	if err == nil || !strings.Contains(err.Error(), "--ocm-max-descriptor-bytes") && !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("error = %v, want one naming the descriptor limit", err)
	}
}

func TestResolveReferencesTransitivelyAndDetectsCycles(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	push := func(name, version string, refs ...string) *ComponentDescriptor {
		cd := &ComponentDescriptor{Meta: Meta{SchemaVersion: SchemaVersionV2}, Component: Component{Name: name, Version: version, Provider: Provider{Name: "acme.org"}}}
		for _, ref := range refs {
			n, v, _ := strings.Cut(ref, ":")
			cd.Component.References = append(cd.Component.References, ComponentReference{ElementMeta: ElementMeta{Name: strings.TrimPrefix(n, "acme.org/"), Version: v}, ComponentName: n})
		}
		if _, err := Push(ctx, repo, cd, nil); err != nil {
			t.Fatal(err)
		}
		return cd
	}
	push("acme.org/c", "1.0.0")
	push("acme.org/b", "1.0.0", "acme.org/c:1.0.0")
	root := push("acme.org/a", "1.0.0", "acme.org/b:1.0.0", "acme.org/c:1.0.0")
	all, err := ResolveReferences(ctx, repo, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["acme.org/c:1.0.0"] == nil {
		t.Fatalf("resolved %v", keys(all))
	}

	push("acme.org/y", "1.0.0", "acme.org/x:1.0.0")
	x := push("acme.org/x", "1.0.0", "acme.org/y:1.0.0")
	_, err = ResolveReferences(ctx, repo, x)
	if err == nil || !strings.Contains(err.Error(), "cycle: acme.org/x:1.0.0 -> acme.org/y:1.0.0 -> acme.org/x:1.0.0") {
		t.Fatalf("error = %v, want a cycle naming the path", err)
	}

	shallow := *repo
	shallow.Limits.MaxReferenceDepth = 1
	if _, err := ResolveReferences(ctx, &shallow, root); err == nil || !strings.Contains(err.Error(), "--ocm-max-reference-depth") {
		t.Fatalf("error = %v, want the depth limit named", err)
	}
	missing := push("acme.org/m", "1.0.0", "acme.org/gone:1.0.0")
	if _, err := ResolveReferences(ctx, repo, missing); err == nil || !strings.Contains(err.Error(), `component reference "gone" of acme.org/m:1.0.0`) {
		t.Fatalf("error = %v, want the missing reference named", err)
	}
}

func keys(m ResolvedComponents) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// basicAuthProxy fronts the registry and asks for basic auth user:secret.
func basicAuthProxy(t *testing.T, registryHost string) string {
	t.Helper()
	target, _ := url.Parse("http://" + registryHost)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestCredentialsFromDockerConfig(t *testing.T) {
	ctx := context.Background()
	host := basicAuthProxy(t, registrytest.Start(t))
	anonymous := &Repository{Base: host + "/ocm", PlainHTTP: true}
	cd := descriptorWithBlob("github.com/acme.org/app", "1.0.0", []byte("x"), "")
	_, err := Push(ctx, anonymous, cd, []LocalBlob{BytesBlob("x", []byte("x"))})
	if !IsUnauthorized(err) || !strings.Contains(err.Error(), host) {
		t.Fatalf("error = %v, want an unauthorized error naming the registry", err)
	}

	cfg, err := ParseDockerConfig([]byte(fmt.Sprintf(`{"auths":{"http://%s/v1/":{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte("user:secret")))))
	if err != nil {
		t.Fatal(err)
	}
	authed := &Repository{Base: host + "/ocm", PlainHTTP: true, Credentials: cfg.CredentialFunc()}
	if _, err := Push(ctx, authed, cd, []LocalBlob{BytesBlob("x", []byte("x"))}); err != nil {
		t.Fatalf("push with credentials: %v", err)
	}
	if _, err := Resolve(ctx, authed, "github.com/acme.org/app", "1.0.0"); err != nil {
		t.Fatalf("resolve with credentials: %v", err)
	}
}

func TestParseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		url, sub, base string
		plain          bool
	}{
		{"ghcr.io", "acme/ocm", "ghcr.io/acme/ocm", false},
		{"http://127.0.0.1:5000/ocm/", "", "127.0.0.1:5000/ocm", true},
		{"oci://eu.gcr.io/proj", "", "eu.gcr.io/proj", false},
	} {
		base, plain, err := ParseBaseURL(tc.url, tc.sub)
		if err != nil || base != tc.base || plain != tc.plain {
			t.Errorf("ParseBaseURL(%q, %q) = %q, %v, %v", tc.url, tc.sub, base, plain, err)
		}
	}
	if _, _, err := ParseBaseURL("ftp://x", ""); err == nil {
		t.Error("an ftp:// baseUrl was accepted")
	}
}
