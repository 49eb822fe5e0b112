package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
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

func provisioningScheme(t *testing.T) *runtime.Scheme {
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
	dir := binDir(t)
	env := testenv.StartT(t, provisioningScheme(t))
	c := env.Client
	// envtest has no kube-controller-manager: do its ClusterRole aggregation
	// once, so that "edit" grants what it grants in a cluster.
	g.Expect(aggregateClusterRoles(ctx, c)).To(Succeed())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, env.KubeConfig, 0o600)).To(Succeed())
	procCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	for _, b := range []string{"dt-binder", "sandbox-provisioner", "spacerequest-stub"} {
		startBinary(t, procCtx, filepath.Join(dir, b), kubeconfig)
	}

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
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	n, err := cs.CoreV1().Namespaces().Get(ctx, target.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	n.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

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

// startBinary runs a controller binary against the API server until the
// test ends, and prints its log if the test failed.
func startBinary(t *testing.T, ctx context.Context, path, kubeconfig string) {
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

// aggregateClusterRoles does once what kube-controller-manager's
// clusterrole-aggregation controller does continuously: it fills the rules of
// aggregated ClusterRoles (admin, edit, view) from the ClusterRoles their
// selectors match. A bare kube-apiserver leaves them empty.
func aggregateClusterRoles(ctx context.Context, c client.Client) error {
	for range 5 { // edit selects view: iterate to a fixed point
		changed := false
		all := &rbacv1.ClusterRoleList{}
		if err := c.List(ctx, all); err != nil {
			return err
		}
		for i := range all.Items {
			role := &all.Items[i]
			if role.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range role.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					return fmt.Errorf("aggregation rule of %s: %w", role.Name, err)
				}
				for j := range all.Items {
					other := &all.Items[j]
					if other.Name == role.Name || !s.Matches(labels.Set(other.Labels)) {
						continue
					}
					for _, r := range other.Rules {
						if !containsRule(rules, r) {
							rules = append(rules, r)
						}
					}
				}
			}
			if len(rules) == 0 || reflect.DeepEqual(rules, role.Rules) {
				continue
			}
			role.Rules = rules
			if err := c.Update(ctx, role); err != nil {
				return fmt.Errorf("aggregating ClusterRole %s: %w", role.Name, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if reflect.DeepEqual(x, r) {
			return true
		}
	}
	return false
}
