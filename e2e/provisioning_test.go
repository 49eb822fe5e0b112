package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apisall "github.com/terrace-dev/terrace/apis/all"
	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/testenv"
)

func provisioningScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apisall.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSeed004DynamicProvisioning runs dt-binder, sandbox-provisioner and
// spacerequest-stub as processes against one API server, applies the YAML of
// seed 004 verbatim (class, claim staging-dtc, Environment), and follows the
// claim to a usable namespace and back to nothing.
func TestSeed004DynamicProvisioning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startProvisioning(t)
	c := env.Client

	const ns = "default" // `kubectl apply -f` without -n
	for _, f := range []string{
		"004-step0-deploymenttargetclass.yaml",
		"004-step1-deploymenttargetclaim.yaml",
		"004-step2-environment.yaml",
	} {
		applySeed(t, c, f, ns)
	}

	const wait, poll = 90 * time.Second, 200 * time.Millisecond

	// The claim ends Bound.
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetClaimPhase {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staging-dtc"}, claim)).To(Succeed())
		return claim.Status.Phase
	}).WithTimeout(wait).WithPolling(poll).Should(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))

	// One target, Bound, provisioned by the sandbox provisioner.
	var dt appstudiov1alpha1.DeploymentTarget
	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetPhase {
		l := &appstudiov1alpha1.DeploymentTargetList{}
		g.Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		g.Expect(l.Items).To(HaveLen(1))
		dt = l.Items[0]
		return dt.Status.Phase
	}).WithTimeout(wait).WithPolling(poll).Should(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
	g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))
	g.Expect(dt.Spec.ClaimRef).NotTo(BeNil())
	g.Expect(dt.Spec.ClaimRef.Name).To(Equal("staging-dtc"))
	g.Expect(dt.Spec.DeploymentTargetClassName).To(Equal("isolation-level-namespace"))

	// One SpaceRequest, Ready, for the claim; its namespace exists.
	srs := &toolchainv1alpha1.SpaceRequestList{}
	g.Expect(c.List(ctx, srs, client.InNamespace(ns), client.MatchingLabels{appstudiov1alpha1.ClaimLabel: "staging-dtc"})).To(Succeed())
	g.Expect(srs.Items).To(HaveLen(1))
	sr := srs.Items[0]
	g.Expect(meta.IsStatusConditionTrue(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)).To(BeTrue())
	g.Expect(sr.Status.NamespaceAccess).To(HaveLen(1))
	target := sr.Status.NamespaceAccess[0]
	g.Expect(dt.Spec.KubernetesClusterCredentials.DefaultNamespace).To(Equal(target.Name))
	g.Expect(dt.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret).To(Equal(target.SecretRef))
	g.Expect(dt.Spec.KubernetesClusterCredentials.APIURL).To(Equal(sr.Status.TargetClusterURL))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: target.Name}, &corev1.Namespace{})).To(Succeed())

	// The target's credentials work in its namespace and nowhere else.
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: dt.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret}, secret)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[toolchainv1alpha1.AdminKubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	scoped, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	configMap := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e"}, Data: map[string]string{"k": "v"}}
	}
	g.Eventually(func() error { return scoped.Create(ctx, configMap(target.Name)) }).
		WithTimeout(wait).WithPolling(poll).Should(Succeed())
	err = scoped.Create(ctx, configMap(ns))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a ConfigMap in %s must be forbidden, got %v", ns, err)

	// Deleting the claim (class reclaimPolicy Delete) deletes the target,
	// the SpaceRequest, its Secret, and the namespace.
	g.Expect(c.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		n := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: target.Name}, n)).To(Succeed())
		g.Expect(n.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(wait).WithPolling(poll).Should(Succeed(), "the namespace is being deleted")
	// No namespace controller here: finish the namespace's deletion as it would.
	finalizeNamespace(t, env, target.Name)

	for _, obj := range []client.Object{
		&toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sr.Name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name}},
		&appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dt.Name}},
		&appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-dtc"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target.Name}},
	} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		}).WithTimeout(wait).WithPolling(poll).Should(BeTrue(), "%T %s is gone", obj, obj.GetName())
	}
}

// provisioningBinaries are the three processes of environment provisioning.
var provisioningBinaries = []string{"dt-binder", "sandbox-provisioner", "spacerequest-stub"}

// startProvisioning starts an API server, does once what kube-controller-manager's
// ClusterRole aggregation would do (envtest has no kube-controller-manager, so
// "edit" would grant nothing), and runs dt-binder, sandbox-provisioner and
// spacerequest-stub as processes against it until tb ends.
func startProvisioning(tb testing.TB) *testenv.Env {
	tb.Helper()
	dir := binDir(tb)
	env := testenv.StartT(tb, provisioningScheme(tb))
	ctx := context.Background()
	if err := testenv.AggregateClusterRoles(ctx, env.Client); err != nil {
		tb.Fatal(err)
	}
	kubeconfig := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		tb.Fatal(err)
	}
	procCtx, cancel := context.WithCancel(ctx)
	tb.Cleanup(cancel)
	for _, b := range provisioningBinaries {
		startBinary(tb, procCtx, filepath.Join(dir, b), kubeconfig)
	}
	return env
}

// finalizeNamespace finishes the deletion of a namespace being deleted, as
// the namespace controller of kube-controller-manager would (envtest has none).
func finalizeNamespace(tb testing.TB, env *testenv.Env, name string) {
	tb.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	n.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// startBinary runs a controller binary against the API server until the
// test ends, and prints its log if the test failed.
func startBinary(t testing.TB, ctx context.Context, path, kubeconfig string) {
	t.Helper()
	name := filepath.Base(path)
	cmd := exec.CommandContext(ctx, path,
		"--kubeconfig", kubeconfig,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--metrics-bind-address", "0",
		"--log-format", "console",
	)
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, log)
		}
	})
}

// applySeed applies one YAML file of examples/seeds as `kubectl apply -n ns`
// would (server-side apply), unchanged.
func applySeed(t *testing.T, c client.Client, file, ns string) {
	t.Helper()
	assets, err := testenv.AssetsDir() // <root>/bin/k8s
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(assets))
	data, err := os.ReadFile(filepath.Join(root, "examples", "seeds", file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if u.GetKind() != "DeploymentTargetClass" {
		u.SetNamespace(ns)
	}
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
		t.Fatalf("applying %s: %v", file, err)
	}
}
