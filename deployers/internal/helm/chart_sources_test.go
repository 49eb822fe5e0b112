package helm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

// versionedChart builds the chart "demo" at version, whose ConfigMap's
// greeting defaults to greeting. Its description names the test, so that
// no other test's chart has its digest (the chart cache is shared).
func versionedChart(t *testing.T, version, greeting string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "demo", Version: version, Description: t.Name()},
		Values:   map[string]any{"greeting": greeting},
		// Save writes values.yaml from Raw.
		Raw: []*chart.File{{Name: "values.yaml", Data: []byte("greeting: " + greeting + "\n")}},
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
`)}},
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// chartServer is an httptest server of files that counts the GETs of each path.
type chartServer struct {
	*httptest.Server
	mu     sync.Mutex
	files  map[string][]byte
	gets   map[string]int
	header string // the Authorization every request must carry, when set
}

func newChartServer(t *testing.T, files map[string][]byte) *chartServer {
	s := &chartServer{files: files, gets: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *chartServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.gets[r.URL.Path]++
	data, ok := s.files[r.URL.Path]
	header := s.header
	s.mu.Unlock()
	if header != "" && r.Header.Get("Authorization") != header {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

func (s *chartServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[path]
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// repoIndex renders an index.yaml of chart demo: 0.1.0 at an absolute
// URL, 0.2.0 at a relative one, 0.3.0-rc.1 a prerelease.
func repoIndex(base string, v1, v2, rc []byte) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
entries:
  demo:
  - name: demo
    version: 0.1.0
    urls: [%s/charts/demo-0.1.0.tgz]
    digest: %s
  - name: demo
    version: 0.2.0
    urls: [charts/demo-0.2.0.tgz]
    digest: %s
  - name: demo
    version: 0.3.0-rc.1
    urls: [charts/demo-0.3.0-rc.1.tgz]
`, base, sha(v1), sha(v2))
}

// TestRemoteArchiveFetchedOnce installs a chart from an archive URL for two
// items: the second is served from the chart cache.
func TestRemoteArchiveFetchedOnce(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	srv := newChartServer(t, map[string][]byte{"/demo.tgz": versionedChart(t, "0.1.0", "remote")})
	for _, name := range []string{"first", "second"} {
		di := createItem(g, ns, name, providerConfig(map[string]any{
			"chart": map[string]any{"archive": map[string]any{"remote": map[string]string{"url": srv.URL + "/demo.tgz"}}},
			"name":  name, "namespace": ns,
		}))
		g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
		g.Expect(greeting(g, ns, name+"-cm")()).To(Equal("remote"))
	}
	g.Expect(srv.count("/demo.tgz")).To(Equal(1), "the second item's chart comes from the cache")
}

// TestHelmChartRepo installs charts from a chart repository that wants an
// Authorization header, given by a Secret the Context's
// helmChartRepoCredentials name: the latest stable version when none is
// set, an exact one, and a semver range. The index and each archive are
// fetched once.
func TestHelmChartRepo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	v1, v2, rc := versionedChart(t, "0.1.0", "v1"), versionedChart(t, "0.2.0", "v2"), versionedChart(t, "0.3.0-rc.1", "rc")
	srv := newChartServer(t, map[string][]byte{
		"/repo/charts/demo-0.2.0.tgz": v2, "/repo/charts/demo-0.1.0.tgz": v1, "/repo/charts/demo-0.3.0-rc.1.tgz": rc,
	})
	srv.files["/repo/index.yaml"] = repoIndex(srv.URL+"/repo", v1, v2, rc)
	srv.header = "Bearer s3cret"
	repoContext(g, ns, "repo-creds", map[string]any{"url": srv.URL + "/repo", "secretRef": map[string]string{"name": "repo-auth"}})
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		StringData: map[string]string{"authHeader": "Bearer s3cret"}})).To(Succeed())

	cases := []struct{ name, version, want string }{
		{"latest", "", "v2"}, {"exact", "0.1.0", "v1"}, {"range", ">=0.1.0 <0.2.0", "v1"}, {"again", "0.2.0", "v2"},
	}
	for _, tc := range cases {
		di := repoItem(g, ns, tc.name, "repo-creds", srv.URL+"/repo/", "demo", tc.version)
		g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), tc.name)
		g.Expect(greeting(g, ns, tc.name+"-cm")()).To(Equal(tc.want), tc.name)
	}
	g.Expect(srv.count("/repo/index.yaml")).To(Equal(1), "the index is cached")
	g.Expect(srv.count("/repo/charts/demo-0.2.0.tgz")).To(Equal(1), "an archive is fetched once")
	g.Expect(srv.count("/repo/charts/demo-0.1.0.tgz")).To(Equal(1), "an archive is fetched once")
	g.Expect(srv.count("/repo/charts/demo-0.3.0-rc.1.tgz")).To(BeZero(), "a prerelease is not the latest")
}

// repoContext creates a Context whose helmChartRepoCredentials hold auth.
func repoContext(g *WithT, ns, name string, auth map[string]any) {
	creds := lsv1alpha1.NewAnyJSON(mustJSON(g, map[string]any{"auths": []map[string]any{auth}}))
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Context{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		Configurations: map[string]lsv1alpha1.AnyJSON{"helmChartRepoCredentials": creds},
	})).To(Succeed())
}

// repoItem creates an item of a chart from a chart repository, with the given Context.
func repoItem(g *WithT, ns, name, lsContext, repoURL, chartName, version string) *lsv1alpha1.DeployItem {
	di := createItemIn(g, ns, name, lsContext, providerConfig(map[string]any{
		"chart": map[string]any{"helmChartRepo": map[string]string{
			"helmChartRepoUrl": repoURL, "helmChartName": chartName, "helmChartVersion": version}},
		"name": name, "namespace": ns,
	}))
	return di
}

// createItemIn is createItem with spec.context set.
func createItemIn(g *WithT, ns, name, lsContext string, config []byte) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lsv1alpha1.DeployItemSpec{
			Type:    helm.Type,
			Target:  &lsv1alpha1.ObjectReference{Name: "t"},
			Context: lsContext,
			Config:  &runtime.RawExtension{Raw: config},
		},
	}
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	return di
}

func mustJSON(g *WithT, v any) []byte {
	raw, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return raw
}

// notFailedRetrying matches an item whose job goes on after a transient
// chart error: lastError without ERR_CONFIGURATION_PROBLEM, not Failed.
func notFailedRetrying(reason, msg string) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) bool {
		e := di.Status.LastError
		return e != nil && e.Reason == reason && strings.Contains(e.Message, msg) && di.Status.Phase != lsv1alpha1.PhaseFailed &&
			!containsCode(e.Codes, lsv1alpha1.ErrorConfigurationProblem)
	}, BeTrue())
}

func containsCode(codes []lsv1alpha1.ErrorCode, c lsv1alpha1.ErrorCode) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}
