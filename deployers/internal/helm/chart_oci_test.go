package helm_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/registry"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// pushArchive pushes a chart archive to a fresh in-process registry and
// returns its reference.
func pushArchive(t *testing.T, archive []byte) string {
	t.Helper()
	ref := registrytest.Start(t) + "/charts/demo:0.1.0"
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(archive, ref); err != nil {
		t.Fatalf("pushing the chart: %v", err)
	}
	return ref
}

// countingProxy fronts the registry at host and counts the GETs of blobs.
func countingProxy(t *testing.T, host string, blobGets *atomic.Int64) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestOCIChartFetchedOnce installs the same OCI chart for two items: the
// second resolves the tag but takes the chart from the cache.
func TestOCIChartFetchedOnce(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	ref := pushArchive(t, versionedChart(t, "0.1.0", "oci"))
	registryHost, path, _ := strings.Cut(ref, "/")
	var blobGets atomic.Int64
	proxied := countingProxy(t, registryHost, &blobGets) + "/" + path
	for _, name := range []string{"first", "second"} {
		di := createItem(g, ns, name, providerConfig(map[string]any{
			"chart": map[string]string{"ref": proxied}, "name": name, "namespace": ns,
		}))
		g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	}
	// One pull: the config blob and the chart layer.
	g.Expect(blobGets.Load()).To(Equal(int64(2)), "the second item's chart comes from the cache")
}
