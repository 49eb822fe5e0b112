package helm_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/kit/ocm"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// TestChartFromComponentHelmChartRepository installs a chart resource
// whose access names a chart in a classic chart repository.
func TestChartFromComponentHelmChartRepository(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	v1, v2, rc := versionedChart(t, "0.1.0", "repo-v1"), versionedChart(t, "0.2.0", "repo-v2"), versionedChart(t, "0.3.0-rc.1", "repo-rc")
	srv := newChartServer(t, map[string][]byte{
		"/repo/charts/demo-0.1.0.tgz": v1, "/repo/charts/demo-0.2.0.tgz": v2, "/repo/charts/demo-0.3.0-rc.1.tgz": rc,
	})
	srv.files["/repo/index.yaml"] = repoIndex(srv.URL+"/repo", v1, v2, rc)
	access := ocm.Access{Type: "helmChartRepository", Fields: map[string]any{
		"type": "helmChartRepository", "helmChartRepoUrl": srv.URL + "/repo", "helmChartName": "demo", "helmChartVersion": "0.1.0",
	}}
	repoCtx, _ := pushChartComponent(t, registrytest.Start(t)+"/components", []ocm.Resource{{
		ElementMeta: ocm.ElementMeta{Name: "repo-chart", Version: "0.1.0"}, Type: "helmChart", Relation: ocm.RelationExternal, Access: access,
	}})
	di := createItem(g, ns, "repo", providerConfig(map[string]any{
		"chart": map[string]any{"resourceRef": resourceKey(t, repoCtx, chartComponent, componentVersion, "repo-chart")}, "name": "repo", "namespace": ns,
	}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, ns, "repo-cm")()).To(Equal("repo-v1"))
}

// TestChartFromComponentPullSecret reads a component version from a
// registry that wants basic auth, with the pull secret of the item's
// Context; without it the item fails naming the refusal.
func TestChartFromComponentPullSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	registry := registrytest.Start(t)
	archive := versionedChart(t, "0.1.0", "private")
	pushChartComponent(t, registry+"/components", []ocm.Resource{blobResource("blob-chart", chartMediaType, archive)}, ocm.BytesBlob(chartMediaType, archive))
	host := basicAuthProxy(t, registry, "puller", "s3cret")
	key := resourceKey(t, &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: host + "/components"}, chartComponent, componentVersion, "blob-chart")
	basic := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"` + basic + `"}}}`)}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: "with-secret", Namespace: ns},
		RegistryPullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: "without", Namespace: ns}})).To(Succeed())

	for _, tc := range []struct{ name, lsContext string }{{"allowed", "with-secret"}, {"refused", "without"}} {
		di := createItemIn(g, ns, tc.name, tc.lsContext, providerConfig(map[string]any{
			"chart": map[string]any{"resourceRef": key}, "name": tc.name, "namespace": ns,
		}))
		if tc.name == "allowed" {
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
			g.Expect(greeting(g, ns, "allowed-cm")()).To(Equal("private"))
			continue
		}
		g.Eventually(get(g, di), timeout, interval).Should(failedWith(helm.ReasonChartPullFailed, "the registry refused the credentials"))
	}
}

// TestComponentBlobChartCached installs one chart blob for two items: the
// second resolves the component version again but takes the chart from
// the cache by the blob's digest.
func TestComponentBlobChartCached(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	registry := registrytest.Start(t)
	archive := versionedChart(t, "0.1.0", "cached")
	pushChartComponent(t, registry+"/components", []ocm.Resource{blobResource("blob-chart", chartMediaType, archive)}, ocm.BytesBlob(chartMediaType, archive))
	var chartGets atomic.Int64
	blobPath := "/blobs/" + digest.FromBytes(archive).String()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registry})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, blobPath) {
			chartGets.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rc := &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: strings.TrimPrefix(srv.URL, "http://") + "/components"}
	for _, name := range []string{"first", "second"} {
		di := createItem(g, ns, name, providerConfig(map[string]any{
			"chart": fromResourceRef(rc, "blob-chart"), "name": name, "namespace": ns,
		}))
		g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	}
	g.Expect(chartGets.Load()).To(Equal(int64(1)), "the second item's chart comes from the cache")
}

// TestComponentRepositoryLoopbackGuard: a component repository on a
// loopback address is refused unless --allow-loopback-registries is set.
func TestComponentRepositoryLoopbackGuard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	archive := versionedChart(t, "0.1.0", "loopback")
	base := registrytest.Start(t) + "/components"
	rc, _ := pushChartComponent(t, base, []ocm.Resource{blobResource("blob-chart", chartMediaType, archive)}, ocm.BytesBlob(chartMediaType, archive))
	key := resourceKey(t, rc, chartComponent, componentVersion, "blob-chart")
	item := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Name: "item", Namespace: ns}}

	_, err := helm.ChartFromResourceKeyFor(ctx, env.Client, helm.ChartSourceOptions{}, item, key)
	g.Expect(err).To(MatchError(ContainSubstring("refused unless the deployer runs with --allow-loopback-registries")))
	ch, err := helm.ChartFromResourceKeyFor(ctx, env.Client, helm.ChartSourceOptions{AllowLoopback: true}, item, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ch.Values).To(HaveKeyWithValue("greeting", "loopback"))
}
