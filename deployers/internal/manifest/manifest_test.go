package manifest_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/testenv"
)

var env *testenv.Env

// Three deployers share one manager, as in a fenced set-up: the default one
// serves Targets without an environment annotation, "manifest-a" and
// "manifest-b" serve the environments a and b.
func TestMain(m *testing.M) {
	os.Exit(testutil.RunMain(m, &env, func(mgr ctrl.Manager) error {
		for name, sel := range map[string]string{
			manifest.DefaultName: "!" + lsv1alpha1.EnvironmentAnnotation,
			"manifest-a":         lsv1alpha1.EnvironmentAnnotation + "=a",
			"manifest-b":         lsv1alpha1.EnvironmentAnnotation + "=b",
		} {
			s, err := lib.ParseTargetSelector(sel, "")
			if err != nil {
				return err
			}
			if err := manifest.AddToManager(mgr, manifest.Options{Name: name, Identity: name + "-id", Version: "test", TargetSelector: s,
				TargetClients: loopbackTargets, MinContinuousReconcileInterval: time.Second}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// loopbackTargets lets the test deployers reach the test API server (and
// the test's own servers) on 127.0.0.1.
var loopbackTargets = lib.TargetClientOptions{AllowLoopback: true}

const (
	timeout  = 30 * time.Second
	interval = 50 * time.Millisecond
)

func setup(t testing.TB) (string, *WithT) {
	t.Helper()
	return testutil.Namespace(t, env), NewWithT(t)
}

// target creates a kubernetes-cluster Target pointing at the test API server.
func target(g *WithT, ns, name string, annotations map[string]string) {
	cfg, err := json.Marshal(map[string]string{"kubeconfig": string(env.KubeConfig)})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	t := &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	}
	g.Expect(env.Client.Create(context.Background(), t)).To(Succeed())
}

func item(ns, name, targetName, config string) *lsv1alpha1.DeployItem {
	return &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lsv1alpha1.DeployItemSpec{
			Type:   manifest.Type,
			Target: &lsv1alpha1.ObjectReference{Name: targetName},
			Config: &runtime.RawExtension{Raw: []byte(config)},
		},
	}
}

// v2 renders a v1alpha2 configuration from YAML-ish JSON fragments.
func v2(body string) string {
	return `{"apiVersion":"manifest.deployer.landscaper.gardener.cloud/v1alpha2","kind":"ProviderConfiguration",` + body + `}`
}

func cm(ns, name string, data map[string]string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]string{"name": name, "namespace": ns}, "data": data})
	return string(b)
}

func get(g *WithT, di *lsv1alpha1.DeployItem) func() *lsv1alpha1.DeployItem {
	return func() *lsv1alpha1.DeployItem {
		out := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(di), out)).To(Succeed())
		return out
	}
}

func phase(p lsv1alpha1.Phase) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) lsv1alpha1.Phase { return di.Status.Phase }, Equal(p))
}

func finished() OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) bool {
		return di.Status.JobID != "" && di.Status.JobID == di.Status.JobIDFinished && di.Status.Phase.IsFinal()
	}, BeTrue())
}

func succeeded() OmegaMatcher { return And(phase(lsv1alpha1.PhaseSucceeded), finished()) }

func failedWith(reason string, code lsv1alpha1.ErrorCode, msg string) OmegaMatcher {
	return And(phase(lsv1alpha1.PhaseFailed), finished(),
		WithTransform(func(di *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return di.Status.LastError },
			And(Not(BeNil()), HaveField("Reason", reason), HaveField("Codes", ContainElement(code)), HaveField("Message", ContainSubstring(msg)))))
}

func gone(g *WithT, obj client.Object) func() bool {
	return func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if err != nil {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			return true
		}
		return false
	}
}

func configMap(g *WithT, ns, name string) func() map[string]string {
	return func() map[string]string {
		c := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			return nil
		}
		return c.Data
	}
}

// TestSeedDeployItem applies the deploy item of seed 001 verbatim next to a
// Target my-target pointing at the test API server.
func TestSeedDeployItem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	raw, err := os.ReadFile("../../../examples/seeds/001-deployitem.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	di := &lsv1alpha1.DeployItem{}
	g.Expect(yaml.UnmarshalStrict(raw, di)).To(Succeed())
	target(g, "default", "my-target", nil)
	// The seed's names are fixed: leave nothing behind for the next run
	// (go test -count=2), the seed's namespace included.
	t.Cleanup(func() { removeSeedObjects(g) })
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())

	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "foo"}, ns)).To(Succeed())

	// The status has the shape of the seed's example.
	got := get(g, di)()
	status, err := json.Marshal(got.Status)
	g.Expect(err).NotTo(HaveOccurred())
	var shape map[string]any
	g.Expect(json.Unmarshal(status, &shape)).To(Succeed())
	g.Expect(shape).To(HaveKeyWithValue("observedGeneration", BeNumerically("==", 1)))
	g.Expect(shape).To(HaveKeyWithValue("phase", "Succeeded"))
	g.Expect(shape).To(HaveKey("lastReconcileTime"))
	g.Expect(shape).To(HaveKeyWithValue("deployer", map[string]any{"name": manifest.DefaultName, "identity": manifest.DefaultName + "-id", "version": "test"}))
	g.Expect(string(got.Status.ProviderStatus.Raw)).To(MatchJSON(`{
		"apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha1",
		"kind": "ProviderStatus",
		"managedResources": [{"policy": "manage", "resource": {"apiVersion": "v1", "kind": "Namespace", "name": "foo", "namespace": ""}}]
	}`))

	// Deleting the item deletes the namespace (envtest has no namespace
	// controller, so the namespace stays Terminating: deletionTimestamp set).
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "foo"}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
}

// removeSeedObjects deletes TestSeedDeployItem's Target and finalizes its
// namespace foo, which envtest (no namespace controller) leaves Terminating.
func removeSeedObjects(g *WithT) {
	ctx := context.Background()
	tg := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "my-target"}}
	g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, tg))).To(Succeed())
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "foo"}, ns); apierrors.IsNotFound(err) {
		return
	}
	g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, ns))).To(Succeed())
	ns.Spec.Finalizers = nil
	g.Expect(client.IgnoreNotFound(env.Client.SubResource("finalize").Update(ctx, ns))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "foo"}, &corev1.Namespace{}))
	}, timeout, interval).Should(BeTrue())
}

func TestDeleteWithoutUninstall(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	nsName := ns + "-kept"
	di := item(ns, "keep", "t", `{"apiVersion":"manifest.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration",
		"manifests":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+nsName+`"}},`+cm(nsName, "c", map[string]string{"a": "b"})+`]}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Annotations = map[string]string{lsv1alpha1.DeleteWithoutUninstallAnnotation: "true"}
	})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	n := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nsName}, n)).To(Succeed())
	g.Expect(n.DeletionTimestamp).To(BeNil())
	g.Expect(configMap(g, nsName, "c")()).To(Equal(map[string]string{"a": "b"}))
}

func TestDeletionOrderAndCleanup(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	nsName := ns + "-app"
	di := item(ns, "app", "t", v2(`"manifests":[
		{"manifest":`+cm(nsName, "c", nil)+`},
		{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+nsName+`"}}}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	// The config map went first and is gone; the namespace is terminating.
	g.Expect(configMap(g, nsName, "c")()).To(BeNil())
	n := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nsName}, n)).To(Succeed())
	g.Expect(n.DeletionTimestamp).NotTo(BeNil())
}

func TestPolicies(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	// A Target with its kubeconfig in a Secret.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: ns}, Data: map[string][]byte{"kubeconfig": env.KubeConfig}}
	g.Expect(env.Client.Create(ctx, sec)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, SecretRef: &lsv1alpha1.LocalSecretReference{Name: "kc"}},
	})).To(Succeed())
	// Somebody else already manages "fallback".
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fallback", Namespace: ns}, Data: map[string]string{"v": "theirs"}},
		client.FieldOwner("someone-else"))).To(Succeed())

	config := func(v string, withManageKeep bool) string {
		var ms []string
		if withManageKeep {
			ms = append(ms, `{"policy":"manage","manifest":`+cm(ns, "manage", map[string]string{"v": v})+`}`,
				`{"policy":"keep","manifest":`+cm(ns, "keep", map[string]string{"v": v})+`}`)
		}
		ms = append(ms,
			`{"policy":"ignore","manifest":`+cm(ns, "ignore", map[string]string{"v": v})+`}`,
			`{"policy":"immutable","manifest":`+cm(ns, "immutable", map[string]string{"v": v})+`}`,
			`{"policy":"fallback","manifest":`+cm(ns, "fallback", map[string]string{"v": v})+`}`,
			`{"policy":"fallback","manifest":`+cm(ns, "fallback-mine", map[string]string{"v": v})+`}`)
		return v2(`"manifests":[` + strings.Join(ms, ",") + `]`)
	}
	di := item(ns, "policies", "t", config("1", true))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "manage")()).To(Equal(map[string]string{"v": "1"}))
	g.Expect(configMap(g, ns, "keep")()).To(Equal(map[string]string{"v": "1"}))
	g.Expect(configMap(g, ns, "ignore")()).To(BeNil())
	g.Expect(configMap(g, ns, "immutable")()).To(Equal(map[string]string{"v": "1"}))
	g.Expect(configMap(g, ns, "fallback")()).To(Equal(map[string]string{"v": "theirs"}))
	g.Expect(configMap(g, ns, "fallback-mine")()).To(Equal(map[string]string{"v": "1"}))
	var ps struct {
		ManagedResources []struct {
			Policy   string `json:"policy"`
			Resource struct{ Name string }
		} `json:"managedResources"`
	}
	g.Expect(json.Unmarshal(get(g, di)().Status.ProviderStatus.Raw, &ps)).To(Succeed())
	// Not recorded: ignore, and fallback, which somebody else manages.
	g.Expect(ps.ManagedResources).To(HaveLen(4))

	// Update: manage, keep and fallback-mine change; immutable does not.
	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(config("2", true))
	})).To(Succeed())
	g.Eventually(configMap(g, ns, "manage"), timeout, interval).Should(Equal(map[string]string{"v": "2"}))
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(configMap(g, ns, "keep")()).To(Equal(map[string]string{"v": "2"}))
	g.Expect(configMap(g, ns, "fallback-mine")()).To(Equal(map[string]string{"v": "2"}))
	g.Expect(configMap(g, ns, "immutable")()).To(Equal(map[string]string{"v": "1"}))
	g.Expect(configMap(g, ns, "fallback")()).To(Equal(map[string]string{"v": "theirs"}))

	// Dropping manage and keep from the configuration deletes manage only.
	cur = get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(config("2", false))
	})).To(Succeed())
	g.Eventually(configMap(g, ns, "manage"), timeout, interval).Should(BeNil())
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(3))))
	g.Expect(configMap(g, ns, "keep")()).NotTo(BeNil())

	// Deleting the item deletes fallback-mine only: immutable and keep stay,
	// and fallback was never ours.
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "fallback-mine")()).To(BeNil())
	g.Expect(configMap(g, ns, "immutable")()).NotTo(BeNil())
	g.Expect(configMap(g, ns, "keep")()).NotTo(BeNil())
	g.Expect(configMap(g, ns, "fallback")()).To(Equal(map[string]string{"v": "theirs"}))
}

func TestUpdateStrategyPatch(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Data: map[string]string{"other": "x"}})).To(Succeed())
	di := item(ns, "patch", "t", v2(`"updateStrategy":"patch","manifests":[{"manifest":`+cm(ns, "p", map[string]string{"v": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "p")()).To(Equal(map[string]string{"other": "x", "v": "1"}))
}

func TestBadInput(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "wrong-type", Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: "landscaper.gardener.cloud/terraform"},
	})).To(Succeed())
	unreachable := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: x}}]
`
	kc, _ := json.Marshal(map[string]string{"kubeconfig": unreachable})
	kcAny := lsv1alpha1.NewAnyJSON(kc)
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "unreachable", Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &kcAny},
	})).To(Succeed())

	cases := []struct {
		name, target, config string
		reason               string
		code                 lsv1alpha1.ErrorCode
		msg                  string
	}{
		{"unknown-policy", "t", v2(`"manifests":[{"policy":"sometimes","manifest":` + cm(ns, "x", nil) + `}]`),
			lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, "spec.config.manifests[0].policy"},
		{"malformed", "t", v2(`"manifests":[{"manifest":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"x"}}}]`),
			lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, "spec.config.manifests[0].manifest.metadata.name"},
		{"unknown-field", "t", v2(`"manifest":[]`),
			lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, "manifest"},
		{"wrong-version", "t", `{"apiVersion":"manifest.deployer.landscaper.gardener.cloud/v9","kind":"ProviderConfiguration"}`,
			lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, "spec.config.apiVersion"},
		{"wrong-target-type", "wrong-type", v2(`"manifests":[]`),
			lib.ReasonTargetType, lsv1alpha1.ErrorConfigurationProblem, "wrong-type"},
		{"missing-target", "nope", v2(`"manifests":[]`),
			lib.ReasonTargetNotFound, lsv1alpha1.ErrorConfigurationProblem, "spec.target: Target " + ns + "/nope not found; create it, then retry with the annotation landscaper.gardener.cloud/operation: reconcile"},
		{"rejected", "t", v2(`"manifests":[{"manifest":` + cm(ns, "Bad_Name", nil) + `}]`),
			manifest.ReasonRejected, lsv1alpha1.ErrorConfigurationProblem, "spec.config.manifests[0].manifest"},
		{"unknown-kind", "t", v2(`"manifests":[{"manifest":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"w"}}}]`),
			manifest.ReasonUnknownKind, lsv1alpha1.ErrorConfigurationProblem, "Widget"},
		{"unreachable", "unreachable", v2(`"manifests":[{"manifest":` + cm(ns, "x", nil) + `}]`),
			manifest.ReasonUnreachable, lsv1alpha1.ErrorTimeout, "unreachable"},
	}
	for _, c := range cases {
		di := item(ns, c.name, c.target, c.config)
		if c.name == "unreachable" {
			d := lsv1alpha1.Duration("3s")
			di.Spec.Timeout = &d
		}
		g.Expect(env.Client.Create(ctx, di)).To(Succeed(), c.name)
	}
	other := item(ns, "other-namespace", "t", v2(`"manifests":[]`))
	other.Spec.Target.Namespace = "default"
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	cases = append(cases, struct {
		name, target, config string
		reason               string
		code                 lsv1alpha1.ErrorCode
		msg                  string
	}{name: "other-namespace", reason: lib.ReasonTargetNamespace, code: lsv1alpha1.ErrorConfigurationProblem, msg: "another namespace"})

	for _, c := range cases {
		g.Eventually(get(g, item(ns, c.name, "", "")), timeout, interval).Should(failedWith(c.reason, c.code, c.msg), c.name)
	}
}

func TestReadinessAndExports(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"` + ns + `"},
		"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
		"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`
	di := item(ns, "web", "t", v2(`"manifests":[{"manifest":`+deploy+`},{"manifest":`+cm(ns, "state", map[string]string{"owner": "deployer"})+`}],
		"readinessChecks":{"custom":[{"name":"state-ready","resourceSelector":[{"apiVersion":"v1","kind":"ConfigMap","name":"state","namespace":"`+ns+`"}],
			"requirements":[{"jsonPath":".data.state","operator":"==","values":["ready"]}]}]},
		"exports":{"exports":[{"key":"state","jsonPath":".data.state","fromResource":{"apiVersion":"v1","kind":"ConfigMap","name":"state","namespace":"`+ns+`"}},
			{"key":"replicas","jsonPath":"{.spec.replicas}","fromResource":{"apiVersion":"apps/v1","kind":"Deployment","name":"web","namespace":"`+ns+`"}}]}`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	g.Expect(get(g, di)().Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("Deployment"))))

	// Play kube-controller-manager: the deployment becomes available.
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep)).To(Succeed())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	g.Expect(env.Client.Status().Update(ctx, dep)).To(Succeed())
	g.Eventually(func() []metav1.Condition { return get(g, di)().Status.Conditions }, timeout, interval).Should(
		ContainElement(HaveField("Message", ContainSubstring("state-ready"))))
	g.Expect(get(g, di)().Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))

	// Somebody else sets the state the custom check waits for.
	g.Expect(env.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "state", Namespace: ns}},
		client.RawPatch("application/merge-patch+json", []byte(`{"data":{"state":"ready"}}`)), client.FieldOwner("operator"))).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	got := get(g, di)()
	g.Expect(got.Status.ExportReference).To(Equal(&lsv1alpha1.ObjectReference{Name: "web-export", Namespace: ns}))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-export"}, sec)).To(Succeed())
	g.Expect(string(sec.Data[lib.ExportKey])).To(MatchJSON(`{"state":"ready","replicas":1}`))
}

func TestReadinessTimeout(t *testing.T) {
	ns, g := setup(t)
	target(g, ns, "t", nil)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"` + ns + `"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	di := item(ns, "slow", "t", v2(`"manifests":[{"manifest":`+pod+`}],"readinessChecks":{"timeout":"2s"}`))
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonNotReady, lsv1alpha1.ErrorTimeout, "Pod"))
}

func TestContinuousReconcileCorrectsDrift(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "drift", "t", v2(`"manifests":[{"manifest":`+cm(ns, "d", map[string]string{"v": "1"})+`}],"continuousReconcile":{"every":"1s"}`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	first := get(g, di)()

	// Drift: somebody deletes the config map; the deployer recreates it
	// without any change to the deploy item.
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}})).To(Succeed())
	g.Eventually(configMap(g, ns, "d"), timeout, interval).Should(Equal(map[string]string{"v": "1"}))
	// The re-apply writes its lastReconcileTime after applying.
	g.Eventually(func() time.Time { return get(g, di)().Status.LastReconcileTime.Time }, timeout, interval).Should(
		BeTemporally(">", first.Status.LastReconcileTime.Time))
	got := get(g, di)()
	g.Expect(got.Status.JobID).To(Equal(first.Status.JobID), "a re-apply is not a new job")
	g.Expect(got).To(succeeded())
}

// TestTargetSelectors: each deployer handles exactly the items whose Target
// is in its environment; the others never write to them.
func TestTargetSelectors(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "in-a", map[string]string{lsv1alpha1.EnvironmentAnnotation: "a"})
	target(g, ns, "in-b", map[string]string{lsv1alpha1.EnvironmentAnnotation: "b"})
	target(g, ns, "in-c", map[string]string{lsv1alpha1.EnvironmentAnnotation: "c"})
	target(g, ns, "plain", nil)
	for _, tn := range []string{"in-a", "in-b", "in-c", "plain"} {
		g.Expect(env.Client.Create(ctx, item(ns, "item-"+tn, tn, v2(`"manifests":[{"manifest":`+cm(ns, "cm-"+tn, nil)+`}]`)))).To(Succeed())
	}
	for tn, deployer := range map[string]string{"in-a": "manifest-a", "in-b": "manifest-b", "plain": manifest.DefaultName} {
		di := item(ns, "item-"+tn, "", "")
		g.Eventually(get(g, di), timeout, interval).Should(succeeded(), tn)
		g.Expect(get(g, di)().Status.Deployer.Name).To(Equal(deployer), tn)
	}
	// Nobody serves environment c: the item is never touched.
	c := get(g, item(ns, "item-in-c", "", ""))()
	g.Expect(c.Status.Phase).To(BeEmpty())
	g.Expect(c.Finalizers).To(BeEmpty())
	g.Consistently(func() string { return get(g, c)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(c.ResourceVersion))
	g.Expect(configMap(g, ns, "cm-in-c")()).To(BeNil())

	// Moving the Target to environment a hands the item to manifest-a.
	tgt := &lsv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "in-c"}, tgt)).To(Succeed())
	g.Expect(testutil.Update(ctx, env.Client, tgt, func(tgt *lsv1alpha1.Target) {
		tgt.Annotations[lsv1alpha1.EnvironmentAnnotation] = "a"
	})).To(Succeed())
	g.Eventually(get(g, c), timeout, interval).Should(succeeded())
	g.Expect(get(g, c)().Status.Deployer.Name).To(Equal("manifest-a"))
}

// A CustomResourceDefinition and an object of its kind in one item: the
// object waits (Progressing) until the target serves the kind, then the item
// succeeds; deleting it removes the object before the CRD.
func TestCRDAndItsObjectInOneItem(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	group := strings.ReplaceAll(ns, "-", "") + ".example.com"
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
		"metadata":{"name":"widgets.` + group + `"},
		"spec":{"group":"` + group + `","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	widget := `{"apiVersion":"` + group + `/v1","kind":"Widget","metadata":{"name":"w","namespace":"` + ns + `"},"spec":{"size":3}}`
	// The object comes first in the configuration: the order must not matter.
	di := item(ns, "crd", "t", v2(`"manifests":[{"manifest":`+widget+`},{"manifest":`+crd+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	w := &unstructured.Unstructured{}
	w.SetAPIVersion(group + "/v1")
	w.SetKind("Widget")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, w)).To(Succeed())
	g.Expect(string(get(g, di)().Status.ProviderStatus.Raw)).To(And(ContainSubstring(`"kind":"Widget"`), ContainSubstring(`"kind":"CustomResourceDefinition"`)))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}

// Objects applied before a later one is refused stay recorded in
// managedResources, so deleting the item removes them too.
func TestPartialApplyFailureKeepsWhatWasApplied(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	refused := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_A_Valid_Name","namespace":"` + ns + `"}}`
	di := item(ns, "partial", "t", v2(`"manifests":[{"manifest":`+cm(ns, "first", map[string]string{"k": "v"})+`},{"manifest":`+refused+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonRejected, lsv1alpha1.ErrorConfigurationProblem, "Not_A_Valid_Name"))
	g.Expect(configMap(g, ns, "first")()).To(HaveKeyWithValue("k", "v"))
	ps := get(g, di)().Status.ProviderStatus
	g.Expect(ps).NotTo(BeNil(), "no managedResources recorded")
	g.Expect(string(ps.Raw)).To(ContainSubstring(`"name":"first"`))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "first")()).To(BeNil(), "deleting the item deleted what it had applied")
}
