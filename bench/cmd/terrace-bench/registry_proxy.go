package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// registryRequestKind sorts the requests a registry client sends by what
// they cost: a tag lookup answers with a digest, a fetch transfers content.
type registryRequestKind int

const (
	// otherRequest: the /v2/ ping, a HEAD of a blob, uploads, anything else.
	otherRequest registryRequestKind = iota
	// tagLookup: HEAD of a manifest by tag (the digest, no content).
	tagLookup
	// manifestFetch: GET of a manifest, by tag or by digest.
	manifestFetch
	// blobFetch: GET of a blob (config, descriptor layer, local blobs).
	blobFetch
)

// classifyRegistryRequest tells the kind of a request to the OCI
// distribution API from its method and path
// (/v2/<name>/manifests/<reference>, /v2/<name>/blobs/<digest>).
func classifyRegistryRequest(method, path string) registryRequestKind {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return otherRequest
	}
	if i := strings.LastIndex(rest, "/manifests/"); i > 0 {
		ref := rest[i+len("/manifests/"):]
		switch {
		case ref == "" || strings.Contains(ref, "/"):
			return otherRequest
		case method == http.MethodGet:
			return manifestFetch
		case method == http.MethodHead && !strings.Contains(ref, ":"):
			return tagLookup
		}
		return otherRequest
	}
	if i := strings.LastIndex(rest, "/blobs/"); i > 0 {
		ref := rest[i+len("/blobs/"):]
		// Uploads live under /blobs/uploads/: no digest there.
		if method == http.MethodGet && strings.Contains(ref, ":") && !strings.Contains(ref, "/") {
			return blobFetch
		}
	}
	return otherRequest
}

// registryFetches is what one run asked of the registry, through the
// counting proxy.
type registryFetches struct {
	// TagLookups: HEADs of a manifest by tag; per root: divided by roots.
	TagLookups        int     `json:"tagLookups"`
	TagLookupsPerRoot float64 `json:"tagLookupsPerRoot"`
	// ManifestsFetched and BlobsFetched are GETs of manifests and blobs.
	ManifestsFetched int `json:"manifestsFetched"`
	BlobsFetched     int `json:"blobsFetched"`
	OtherRequests    int `json:"otherRequests"`
	// Requests counts each method and path.
	Requests map[string]int `json:"requests"`
}

// newRegistryFetches sums counts ("METHOD /path" → n) by kind.
func newRegistryFetches(counts map[string]int, roots int) *registryFetches {
	f := &registryFetches{Requests: counts}
	for key, n := range counts {
		method, path, _ := strings.Cut(key, " ")
		switch classifyRegistryRequest(method, path) {
		case tagLookup:
			f.TagLookups += n
		case manifestFetch:
			f.ManifestsFetched += n
		case blobFetch:
			f.BlobsFetched += n
		default:
			f.OtherRequests += n
		}
	}
	if roots > 0 {
		f.TagLookupsPerRoot = float64(f.TagLookups) / float64(roots)
	}
	return f
}

// refetched names every manifest or blob fetched more than once: content
// that should have come from the reader's cache.
func (f *registryFetches) refetched() error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(f.Requests)) {
		method, path, _ := strings.Cut(key, " ")
		kind := classifyRegistryRequest(method, path)
		if n := f.Requests[key]; (kind == manifestFetch || kind == blobFetch) && n > 1 {
			errs = append(errs, fmt.Errorf("%s fetched %d times, want at most once", path, n))
		}
	}
	return errors.Join(errs...)
}

// String is the line the workload's output prints.
func (f *registryFetches) String() string {
	return fmt.Sprintf("registry: %d tag lookups (%.2f per installation), manifests fetched: %d, blobs fetched: %d, other requests: %d",
		f.TagLookups, f.TagLookupsPerRoot, f.ManifestsFetched, f.BlobsFetched, f.OtherRequests)
}

// countingProxy is a reverse proxy in front of a registry that counts the
// requests it passes on by method and path: the controllers read the
// registry through it, so the bench sees what they fetched.
type countingProxy struct {
	addr string
	srv  *http.Server
	mu   sync.Mutex
	seen map[string]int
}

// startCountingProxy listens on a free loopback port and forwards to the
// plain-HTTP registry at target (host:port).
func startCountingProxy(target string) (*countingProxy, error) {
	u, err := url.Parse("http://" + target)
	if err != nil {
		return nil, fmt.Errorf("registry address %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the counting registry proxy: %w", err)
	}
	p := &countingProxy{addr: ln.Addr().String(), seen: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			p.seen[r.Method+" "+r.URL.Path]++
			p.mu.Unlock()
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// reset forgets what was counted so far.
func (p *countingProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = map[string]int{}
}

// counts is a copy of what was counted since the last reset.
func (p *countingProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.seen)
}

func (p *countingProxy) close() { _ = p.srv.Close() }
