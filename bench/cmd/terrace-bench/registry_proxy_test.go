package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClassifyRegistryRequest(t *testing.T) {
	const cd = "/v2/bench/ocm/component-descriptors/bench.terrace.dev/mock"
	for _, tc := range []struct {
		method, path string
		want         registryRequestKind
	}{
		{http.MethodHead, cd + "/manifests/1.0.0-run1", tagLookup},
		{http.MethodGet, cd + "/manifests/1.0.0-run1", manifestFetch},
		{http.MethodGet, cd + "/manifests/sha256:abc", manifestFetch},
		{http.MethodHead, cd + "/manifests/sha256:abc", otherRequest},
		{http.MethodGet, cd + "/blobs/sha256:abc", blobFetch},
		{http.MethodHead, cd + "/blobs/sha256:abc", otherRequest},
		{http.MethodGet, cd + "/blobs/uploads/0f3c", otherRequest},
		{http.MethodPost, cd + "/blobs/uploads/", otherRequest},
		{http.MethodPut, cd + "/manifests/1.0.0-run1", otherRequest},
		{http.MethodGet, "/v2/", otherRequest},
		// A repository named like an API segment is still a repository.
		{http.MethodGet, "/v2/blobs/manifests/x/manifests/1.0", manifestFetch},
		{http.MethodGet, "/healthz", otherRequest},
	} {
		if got := classifyRegistryRequest(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s: got kind %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestRegistryFetchesSumsAndRefusesRefetches(t *testing.T) {
	const repo = "/v2/bench/ocm/component-descriptors/x"
	once := map[string]int{
		"HEAD " + repo + "/manifests/1.0.0": 100,
		"GET " + repo + "/manifests/1.0.0":  1,
		"GET " + repo + "/blobs/sha256:cfg": 1,
		"GET " + repo + "/blobs/sha256:cd":  1,
		"GET " + repo + "/blobs/sha256:bp":  1,
		"GET /v2/":                          3,
	}
	f := newRegistryFetches(once, 100)
	if f.TagLookups != 100 || f.TagLookupsPerRoot != 1 || f.ManifestsFetched != 1 || f.BlobsFetched != 3 || f.OtherRequests != 3 {
		t.Errorf("sums: %+v", f)
	}
	if err := f.refetched(); err != nil {
		t.Errorf("each fetched once: %v", err)
	}

	once["GET "+repo+"/blobs/sha256:bp"] = 2
	err := newRegistryFetches(once, 100).refetched()
	if err == nil || !strings.Contains(err.Error(), repo+"/blobs/sha256:bp fetched 2 times") {
		t.Errorf("a blueprint blob fetched twice: got %v", err)
	}
}

func TestCountingProxyForwardsAndCounts(t *testing.T) {
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "content of "+r.URL.Path)
	}))
	defer registry.Close()
	p, err := startCountingProxy(strings.TrimPrefix(registry.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + p.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	const blob = "/v2/r/blobs/sha256:abc"
	get("/v2/")
	p.reset()
	if body := get(blob); body != "content of "+blob {
		t.Errorf("forwarded body %q", body)
	}
	get(blob)
	counts := p.counts()
	if len(counts) != 1 || counts["GET "+blob] != 2 {
		t.Errorf("counts after reset and two GETs: %v", counts)
	}
}
