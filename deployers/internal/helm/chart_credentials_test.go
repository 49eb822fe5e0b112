package helm_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// basicAuthProxy fronts the registry at host and answers 401 to a request
// without the basic credential user:pass.
func basicAuthProxy(t *testing.T, host, user, pass string) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestRegistryPullSecrets pulls from a registry that wants basic auth with
// the credential of a kubernetes.io/dockerconfigjson Secret in the item's
// namespace; a missing or mistyped pull secret is a
// configuration error naming the Secret and the reason.
func TestRegistryPullSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	ref := pushArchive(t, versionedChart(t, "0.1.0", "private"))
	registryHost, path, _ := strings.Cut(ref, "/")
	host := basicAuthProxy(t, registryHost, "puller", "s3cret")
	private := host + "/" + path
	basic := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"http://` + host + `":{"auth":"` + basic + `"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-registry", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"elsewhere.example":{"username":"x","password":"y"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "opaque", Namespace: ns}, StringData: map[string]string{"x": "y"}},
	}
	for _, s := range secrets {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	opts := helm.ChartSourceOptions{AllowLoopback: true}
	contexts := 0
	// pull pulls the chart for an item whose Context names the pull secrets.
	pull := func(names ...string) error {
		contexts++
		lsCtx := &lsv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pull-%d", contexts), Namespace: ns}}
		for _, n := range names {
			lsCtx.RegistryPullSecrets = append(lsCtx.RegistryPullSecrets, corev1.LocalObjectReference{Name: n})
		}
		g.Expect(env.Client.Create(ctx, lsCtx)).To(Succeed())
		item := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Name: "item", Namespace: ns}}
		item.Spec.Context = lsCtx.Name
		_, err := helm.PullFor(ctx, env.Client, opts, item, private)
		return err
	}

	g.Expect(pull("other-registry", "pull")).To(Succeed(), "the first pull secret with a credential for the registry")
	g.Expect(pull("other-registry")).To(MatchError(ContainSubstring("the registry refused access")))
	cases := []struct{ secret, msg string }{
		{"missing", "registryPullSecrets[0]: Secret " + ns + "/missing not found"},
		{"opaque", `Secret ` + ns + `/opaque has type "Opaque"; a registry pull secret has type kubernetes.io/dockerconfigjson`},
	}
	for _, tc := range cases {
		err := pull(tc.secret)
		g.Expect(err).To(MatchError(ContainSubstring(tc.msg)), tc.secret)
		g.Expect(lib.IsPermanent(err)).To(BeTrue(), tc.secret)
	}
}
