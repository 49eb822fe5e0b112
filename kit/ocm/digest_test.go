package ocm

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// pushTwice pushes version 1.0.0 of name with blob "first", then again
// with blob "second", and returns the first manifest's digest: the tag now
// points at the second.
func pushTwice(t *testing.T, repo *Repository, name string) digest.Digest {
	t.Helper()
	var first digest.Digest
	for _, content := range []string{"first", "second"} {
		blob := []byte(content)
		desc, err := Push(context.Background(), repo, descriptorWithBlob(name, "1.0.0", blob, ""), []LocalBlob{BytesBlob("x", blob)})
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = desc.Digest
		}
	}
	return first
}

// A version read by digest is the content at that digest, not what the
// tag points at now, local blobs included.
func TestResolveVersionByDigestReadsThatContentAfterTheTagMoved(t *testing.T) {
	ctx := context.Background()
	repo := testRepository(t)
	const name = "github.com/acme.org/app"
	first := pushTwice(t, repo, name)

	now, err := ResolveVersion(ctx, repo, name, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if now.Digest == first {
		t.Fatalf("the tag still points at %s after the second push", first)
	}
	v, err := ResolveVersionByDigest(ctx, repo, name, first)
	if err != nil {
		t.Fatalf("reading %s by digest: %v", first, err)
	}
	if v.Digest != first || v.Descriptor.Key() != name+":1.0.0" {
		t.Fatalf("read %s at %s, want %s:1.0.0 at %s", v.Descriptor.Key(), v.Digest, name, first)
	}
	res, err := v.Descriptor.Resource("blueprint", nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := BlobOf(ctx, repo, v.Descriptor, v.Layers, res)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var data bytes.Buffer
	if _, err := data.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	if data.String() != "first" {
		t.Errorf("the local blob of the version read by digest is %q, want %q", data.String(), "first")
	}
}

// A digest the registry does not have is a NotFoundError naming the
// component, the digest and the repository.
func TestResolveVersionByDigestNamesAMissingDigest(t *testing.T) {
	repo := testRepository(t)
	const name = "github.com/acme.org/app"
	pushTwice(t, repo, name)
	gone := digest.FromString("never pushed")
	_, err := ResolveVersionByDigest(context.Background(), repo, name, gone)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error = %v, want a NotFoundError", err)
	}
	for _, part := range []string{name + "@" + gone.String(), repo.Base} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %q", err, part)
		}
	}
	if _, err := ResolveVersionByDigest(context.Background(), repo, name, "sha256:short"); err == nil || !strings.Contains(err.Error(), "not a manifest digest") {
		t.Errorf("an invalid digest gave %v, want an error saying it is not a manifest digest", err)
	}
}

// A registry that answers a digest with other content is refused, whether
// it says how long that content is or not: the error names the digest
// asked for.
func TestResolveVersionByDigestRefusesOtherContent(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		repo := testRepository(t)
		const name = "github.com/acme.org/app"
		first := pushTwice(t, repo, name)
		repo.Base = lyingRegistry(t, repo.Host(), first.String(), "1.0.0", withLength) + "/landscapes"

		v, err := ResolveVersionByDigest(context.Background(), repo, name, first)
		if err == nil {
			t.Fatalf("with Content-Length %v: the registry's other content was read as the version at %s (read %s)", withLength, first, v.Digest)
		}
		if !strings.Contains(err.Error(), first.String()) || !strings.Contains(err.Error(), "digest") {
			t.Errorf("with Content-Length %v: error = %v, want it to name the digest asked for", withLength, err)
		}
	}
}

// lyingRegistry fronts the registry and answers manifest requests for
// digest dg with the manifest tagged tag, without the Docker-Content-Digest
// header that would give it away and, unless withLength, without
// Content-Length.
func lyingRegistry(t *testing.T, registryHost, dg, tag string, withLength bool) string {
	t.Helper()
	target, _ := url.Parse("http://" + registryHost)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		resp.Header.Del("Docker-Content-Digest")
		if !withLength && resp.Request.Method == http.MethodGet {
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.Replace(r.URL.Path, "/manifests/"+dg, "/manifests/"+tag, 1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
