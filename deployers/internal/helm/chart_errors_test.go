package helm_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestChartSourceBadInput: each bad chart source or credential ends the
// item Failed with a lastError naming the field, the reference and the
// reason.
func TestChartSourceBadInput(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	v1, v2 := versionedChart(t, "0.1.0", "v1"), versionedChart(t, "0.2.0", "v2")
	srv := newChartServer(t, map[string][]byte{
		"/not-a-chart.tgz":            []byte("not a chart"),
		"/bad/index.yaml":             []byte("<html>a web page</html>"),
		"/huge.tgz":                   []byte(strings.Repeat("x", helm.DefaultMaxChartBytes+1)),
		"/repo/charts/demo-0.2.0.tgz": v2, "/repo/charts/demo-0.1.0.tgz": v1,
	})
	srv.files["/repo/index.yaml"] = repoIndex(srv.URL+"/repo", v1, v2, nil)
	locked := newChartServer(t, map[string][]byte{"/repo/index.yaml": srv.files["/repo/index.yaml"]})
	locked.header = "Bearer s3cret"
	repoContext(g, ns, "no-secret", map[string]any{"url": locked.URL, "secretRef": map[string]string{"name": "nope"}})
	repoContext(g, ns, "no-key", map[string]any{"url": locked.URL, "secretRef": map[string]string{"name": "empty"}})
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: ns},
		StringData: map[string]string{"other": "x"}})).To(Succeed())
	remote := func(url string) map[string]any {
		return map[string]any{"chart": map[string]any{"archive": map[string]any{"remote": map[string]string{"url": url}}}}
	}
	repoChart := func(url, name, version string) map[string]any {
		return map[string]any{"chart": map[string]any{"helmChartRepo": map[string]string{
			"helmChartRepoUrl": url, "helmChartName": name, "helmChartVersion": version}}}
	}
	oci := pushChart(t)
	cases := []struct {
		name, lsContext, reason, msg string
		fields                       map[string]any
	}{
		{"wrong-tag", "", helm.ReasonChartPullFailed, `spec.config.chart.ref "` + strings.TrimSuffix(oci, "0.1.0") + `9.9.9": the registry has no such chart`,
			map[string]any{"chart": map[string]string{"ref": strings.TrimSuffix(oci, "0.1.0") + "9.9.9"}}},
		{"remote-missing", "", helm.ReasonChartPullFailed, `spec.config.chart.archive.remote.url "` + srv.URL + `/missing.tgz": the server has no such file (HTTP 404)`,
			remote(srv.URL + "/missing.tgz")},
		{"remote-not-a-chart", "", helm.ReasonInvalidChart, `spec.config.chart.archive.remote.url "` + srv.URL + `/not-a-chart.tgz": not a chart archive`,
			remote(srv.URL + "/not-a-chart.tgz")},
		{"remote-too-large", "", helm.ReasonInvalidChart, "the server's response is larger than 10Mi (--max-chart-bytes)",
			remote(srv.URL + "/huge.tgz")},
		{"remote-not-http", "", lib.ReasonInvalidConfig, `spec.config.chart.archive.remote.url "file:///etc/passwd": want an absolute http or https URL`,
			remote("file:///etc/passwd")},
		{"repo-no-version", "", helm.ReasonChartVersionNotFound, `spec.config.chart.helmChartRepo.helmChartVersion: the index of ` + srv.URL + `/repo has no version 9.9.9 of chart "demo"; it has 0.3.0-rc.1, 0.2.0, 0.1.0`,
			repoChart(srv.URL+"/repo", "demo", "9.9.9")},
		{"repo-no-chart", "", helm.ReasonChartVersionNotFound, `spec.config.chart.helmChartRepo.helmChartName: the index of ` + srv.URL + `/repo has no chart "other"`,
			repoChart(srv.URL+"/repo", "other", "")},
		{"repo-unknown", "", helm.ReasonChartPullFailed, `spec.config.chart.helmChartRepo.helmChartRepoUrl "` + srv.URL + `/nothing/index.yaml": the server has no such file (HTTP 404)`,
			repoChart(srv.URL+"/nothing", "demo", "")},
		{"repo-not-a-repo", "", helm.ReasonChartPullFailed, `spec.config.chart.helmChartRepo.helmChartRepoUrl: ` + srv.URL + `/bad/index.yaml is not a chart repository index`,
			repoChart(srv.URL+"/bad", "demo", "")},
		{"repo-no-credentials", "", helm.ReasonChartPullFailed, "the server refused access (HTTP 401)",
			repoChart(locked.URL, "demo", "")},
		{"repo-secret-missing", "no-secret", helm.ReasonChartCredentials,
			"Context " + ns + "/no-secret configurations.helmChartRepoCredentials.auths[0].secretRef: Secret " + ns + "/nope not found",
			repoChart(locked.URL, "demo", "")},
		{"repo-secret-key-missing", "no-key", helm.ReasonChartCredentials,
			"Context " + ns + "/no-key configurations.helmChartRepoCredentials.auths[0].secretRef: Secret " + ns + `/empty has no key "authHeader"`,
			repoChart(locked.URL, "demo", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.fields["name"], tc.fields["namespace"] = tc.name, ns
			di := createItemIn(g, ns, tc.name, tc.lsContext, providerConfig(tc.fields))
			g.Eventually(get(g, di), timeout, interval).Should(failedWith(tc.reason, tc.msg))
		})
	}
}

// TestChartServerDown: a chart server or registry that does not answer is
// retried, not a configuration problem.
func TestChartServerDown(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	down := httptest.NewServer(nil)
	down.Close()
	host := strings.TrimPrefix(down.URL, "http://")
	cases := map[string]map[string]any{
		"archive":  {"chart": map[string]any{"archive": map[string]any{"remote": map[string]string{"url": down.URL + "/demo.tgz"}}}},
		"repo":     {"chart": map[string]any{"helmChartRepo": map[string]string{"helmChartRepoUrl": down.URL, "helmChartName": "demo"}}},
		"registry": {"chart": map[string]string{"ref": host + "/charts/demo:0.1.0"}},
	}
	for name, fields := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fields["name"], fields["namespace"] = name, ns
			di := createItem(g, ns, name, providerConfig(fields))
			g.Eventually(get(g, di), timeout, interval).Should(notFailedRetrying(helm.ReasonChartPullFailed, "connection refused"))
		})
	}
}
