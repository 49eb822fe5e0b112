package components

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

const blueprintTarGzip = "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip"

// env is a registry with an OCM repository and a client that counts the
// requests made through it.
type env struct {
	host    string
	repo    *ocm.Repository
	rc      *lsv1alpha1.RepositoryContext
	counter *countingTransport
	client  *http.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host := registrytest.Start(t)
	counter := &countingTransport{next: http.DefaultTransport}
	return &env{
		host:    host,
		repo:    &ocm.Repository{Base: host + "/ocm", PlainHTTP: true},
		rc:      &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: "http://" + host + "/ocm"},
		counter: counter,
		client:  &http.Client{Transport: counter},
	}
}

func (e *env) resolver(t *testing.T, opts Options) *Resolver {
	t.Helper()
	r, err := NewResolver(opts, e.client)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) ref(name, version string) Request {
	return Request{Definition: lsv1alpha1.ComponentDescriptorDefinition{Reference: &lsv1alpha1.ComponentDescriptorReference{
		RepositoryContext: e.rc, ComponentName: name, Version: version,
	}}}
}

// countingTransport counts requests by "<method> <kind>", kind being
// "blob" or "manifest".
type countingTransport struct {
	next   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := "other"
	switch {
	case strings.Contains(req.URL.Path, "/blobs/"):
		kind = "blob"
	case strings.Contains(req.URL.Path, "/manifests/"):
		kind = "manifest"
	}
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[req.Method+" "+kind]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *countingTransport) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

func (c *countingTransport) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// component is a component version to push: local blobs by resource name,
// OCI artifact resources, references.
type component struct {
	name, version string
	blobs         []blobResource
	artifacts     map[string]string // resource name → image reference
	refs          []ocm.ComponentReference
}

type blobResource struct {
	name, mediaType string
	data            []byte
}

func (e *env) push(t *testing.T, c component) digest.Digest {
	t.Helper()
	cd := &ocm.ComponentDescriptor{Meta: ocm.Meta{SchemaVersion: ocm.SchemaVersionV2}, Component: ocm.Component{
		Name: c.name, Version: c.version, Provider: ocm.Provider{Name: "acme.org"}, References: c.refs,
	}}
	var blobs []ocm.LocalBlob
	for _, b := range c.blobs {
		cd.Component.Resources = append(cd.Component.Resources, ocm.Resource{
			ElementMeta: ocm.ElementMeta{Name: b.name, Version: c.version}, Type: "blueprint", Relation: ocm.RelationLocal,
			Access: ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{LocalReference: digest.FromBytes(b.data).String(), MediaType: b.mediaType}),
		})
		blobs = append(blobs, ocm.BytesBlob(b.mediaType, b.data))
	}
	for name, ref := range c.artifacts {
		cd.Component.Resources = append(cd.Component.Resources, ocm.Resource{
			ElementMeta: ocm.ElementMeta{Name: name, Version: c.version}, Type: "blueprint", Relation: ocm.RelationExternal,
			Access: ocm.NewOCIArtifactAccess(ref),
		})
	}
	desc, err := ocm.Push(context.Background(), e.repo, cd, blobs)
	if err != nil {
		t.Fatalf("pushing %s:%s: %v", c.name, c.version, err)
	}
	return desc.Digest
}

func reference(name, componentName, version string) ocm.ComponentReference {
	return ocm.ComponentReference{ElementMeta: ocm.ElementMeta{Name: name, Version: version}, ComponentName: componentName}
}

// pushArtifact pushes a one-layer OCI artifact and returns its reference.
func (e *env) pushArtifact(t *testing.T, repository, tag, mediaType string, data []byte) string {
	t.Helper()
	ctx := context.Background()
	r, err := remote.NewRepository(e.host + "/" + repository)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	layer, err := oras.PushBytes(ctx, r, mediaType, data)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, "application/vnd.gardener.landscaper.blueprint", oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Tag(ctx, manifest, tag); err != nil {
		t.Fatal(err)
	}
	return e.host + "/" + repository + ":" + tag
}

// entry is one tar entry; typeflag 0 means a regular file.
type entry struct {
	name, content string
	typeflag      byte
}

func tarOf(t *testing.T, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.content)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if e.typeflag != 0 {
			h.Typeflag, h.Size, h.Linkname = e.typeflag, 0, "/etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !gz {
		return buf.Bytes()
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// blueprintArchive is a small valid blueprint.
func blueprintArchive(t *testing.T, gz bool, marker string) []byte {
	return tarOf(t, gz,
		entry{name: "blueprint.yaml", content: "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Blueprint\n# " + marker + "\n"},
		entry{name: "data/", typeflag: tar.TypeDir},
		entry{name: "./data/template.yaml", content: "deployItems: []\n"},
	)
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}
