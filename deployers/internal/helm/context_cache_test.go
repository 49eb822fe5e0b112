package helm_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// contextGets counts the requests that read one Context of a namespace
// (lists and watches of the informer are not counted).
type contextGets struct {
	next  http.RoundTripper
	path  string
	count *atomic.Int64
}

func (c contextGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, c.path) {
		c.count.Add(1)
	}
	return c.next.RoundTrip(r)
}

// unseenContext is a manager's cache that has not seen the Context named
// hidden yet; every other read goes through unchanged.
type unseenContext struct {
	client.Client
	hidden string
}

func (c unseenContext) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*lsv1alpha1.Context); ok && key.Name == c.hidden {
		return apierrors.NewNotFound(lsv1alpha1.SchemeGroupVersion.WithResource("contexts").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// startCountingDeployer starts a helm deployer of its own for the Targets
// of environment envName in ns, whose cache has not seen the Context named
// hidden; it returns the count of its requests for single Contexts of ns.
func startCountingDeployer(t *testing.T, ns, envName, hidden string) *atomic.Int64 {
	t.Helper()
	count := &atomic.Int64{}
	counted := *env
	counted.Config = rest.CopyConfig(env.Config)
	counted.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return contextGets{next: rt, path: "/namespaces/" + ns + "/contexts/", count: count}
	})
	testutil.StartManagerWithClient(t, &counted,
		func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			return unseenContext{Client: c, hidden: hidden}, err
		},
		func(mgr ctrl.Manager) error {
			sel, err := lib.ParseTargetSelector(lsv1alpha1.EnvironmentAnnotation+"="+envName, "")
			if err != nil {
				return err
			}
			return helm.AddToManager(mgr, helm.Options{Name: "helm-" + envName, TargetSelector: sel, Namespaces: []string{ns},
				TargetClients: lib.TargetClientOptions{AllowLoopback: true}, Charts: helm.ChartSourceOptions{AllowLoopback: true}})
		})
	return count
}

// fencedTarget creates Target "t" of environment envName pointing at the
// test API server.
func fencedTarget(g *WithT, ns, envName string) {
	cfg, err := json.Marshal(map[string]string{"kubeconfig": string(env.KubeConfig)})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns, Annotations: map[string]string{lsv1alpha1.EnvironmentAnnotation: envName}},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	})).To(Succeed())
}

// TestNoContextCostsNoRequest: an item without a Context, in a namespace
// without a default Context, is deployed without the deployer asking the
// API server for a Context (the cache tells it there is none).
func TestNoContextCostsNoRequest(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	gets := startCountingDeployer(t, ns, "requests", "")
	fencedTarget(g, ns, "requests")
	ref := pushArchive(t, versionedChart(t, "0.1.0", "no-context"))
	di := createItem(g, ns, "no-context", providerConfig(map[string]any{"chart": map[string]any{"ref": ref}, "name": "no-context", "namespace": ns}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, ns, "no-context-cm")()).To(Equal("no-context"))
	g.Expect(gets.Load()).To(BeZero(), "requests for a Context of %s", ns)
}

// TestNamedContextNotCachedYet: a Context the item names, created before
// the item but not yet in the deployer's cache, is read from the API server
// and its pull secret is used; a named Context that does not exist fails
// the item.
func TestNamedContextNotCachedYet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	gets := startCountingDeployer(t, ns, "unseen", "new")
	fencedTarget(g, ns, "unseen")
	ref := pushArchive(t, versionedChart(t, "0.1.0", "unseen"))
	registryHost, path, _ := strings.Cut(ref, "/")
	host := basicAuthProxy(t, registryHost, "puller", "s3cret")
	basic := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"` + basic + `"}}}`)}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns},
		RegistryPullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}})).To(Succeed())

	chart := map[string]any{"ref": host + "/" + path}
	di := createItemIn(g, ns, "unseen", "new", providerConfig(map[string]any{"chart": chart, "name": "unseen", "namespace": ns}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, ns, "unseen-cm")()).To(Equal("unseen"))
	g.Expect(gets.Load()).NotTo(BeZero(), "the Context is asked of the API server")

	absent := createItemIn(g, ns, "absent", "absent", providerConfig(map[string]any{"chart": chart, "name": "absent", "namespace": ns}))
	g.Eventually(get(g, absent), timeout, interval).Should(failedWith(lib.ReasonContextNotFound, "Context "+ns+"/absent not found"))
}
