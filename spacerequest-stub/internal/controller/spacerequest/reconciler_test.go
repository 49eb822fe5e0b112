package spacerequest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

var seq atomic.Int32

// unique makes names unique per test run, so that -count=N works against the
// one API server of the package.
func unique(base string) string {
	return fmt.Sprintf("%s-%d", base, seq.Add(1))
}

func createNamespace(t *testing.T, g Gomega, name string) {
	t.Helper()
	g.Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// nsName is the namespace the stub provisions for the SpaceRequest
// namespace/name.
func nsName(namespace, name string) string {
	return spacerequest.NamespaceName(newSpaceRequest(namespace, name))
}

func newSpaceRequest(ns, name string) *toolchainv1alpha1.SpaceRequest {
	return &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
}

// ready returns the SpaceRequest's Ready condition, or nil.
func ready(g Gomega, key client.ObjectKey) *metav1.Condition {
	sr := &toolchainv1alpha1.SpaceRequest{}
	g.Expect(env.Client.Get(context.Background(), key, sr)).To(Succeed())
	return meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
}

func reason(key client.ObjectKey) func(g Gomega) string {
	return func(g Gomega) string {
		c := ready(g, key)
		if c == nil {
			return ""
		}
		return c.Reason
	}
}

// TestProvisionUseAndTerminate walks one SpaceRequest through its whole life:
// Provisioned, usable only in its own namespace, repaired when a piece goes
// missing, Terminating, UnableToTerminate after the (shortened) timeout, and
// gone once the namespace finally goes.
func TestProvisionUseAndTerminate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-a")
	createNamespace(t, g, team)
	provisioned := nsName(team, "staging")
	sr := newSpaceRequest(team, "staging")
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)

	// Ready, with status telling where and how to connect.
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(c.Get(ctx, key, sr)).To(Succeed())
	cond := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(cond.ObservedGeneration).To(Equal(sr.Generation))
	g.Expect(sr.Status.ObservedGeneration).To(Equal(sr.Generation))
	g.Expect(sr.Finalizers).To(ContainElement(toolchainv1alpha1.Finalizer))
	g.Expect(sr.Status.TargetClusterURL).To(Equal(env.Config.Host))
	g.Expect(sr.Status.NamespaceAccess).To(Equal([]toolchainv1alpha1.NamespaceAccess{
		{Name: provisioned, SecretRef: "staging-kubeconfig"},
	}))

	// The namespace, its ServiceAccount and RoleBinding to the bootstrap
	// edit ClusterRole exist.
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
	g.Expect(ns.Annotations).To(HaveKeyWithValue(spacerequest.SpaceRequestAnnotation, team+"/staging"))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "edit"}, &rbacv1.ClusterRole{})).To(Succeed(), "envtest's API server bootstraps the edit ClusterRole")
	rb := &rbacv1.RoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: provisioned, Name: spacerequest.RoleBindingName}, rb)).To(Succeed())
	g.Expect(rb.RoleRef.Name).To(Equal("edit"))

	// A client built from the kubeconfig Secret can work in the namespace
	// and nowhere else.
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: team, Name: "staging-kubeconfig"}, secret)).To(Succeed())
	g.Expect(secret.OwnerReferences).To(HaveLen(1))
	g.Expect(secret.Annotations).To(HaveKey(spacerequest.TokenExpiresAtAnnotation))
	expires, err := time.Parse(time.RFC3339, secret.Annotations[spacerequest.TokenExpiresAtAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expires).To(BeTemporally(">", time.Now().Add(300*24*time.Hour)), "a long-lived token was requested")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[toolchainv1alpha1.AdminKubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal(env.Config.Host))
	scoped, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}, Data: map[string]string{"a": "b"}}
	}
	// RBAC takes a moment to see the new RoleBinding.
	g.Eventually(func() error { return scoped.Create(ctx, cm(provisioned)) }).
		WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	err = scoped.Create(ctx, cm("default"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating in default must be forbidden, got %v", err)

	// A piece deleted behind the stub's back comes back (event-driven).
	g.Expect(c.Delete(ctx, rb)).To(Succeed())
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: provisioned, Name: spacerequest.RoleBindingName}, &rbacv1.RoleBinding{})
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// A recreated ServiceAccount (new UID: tokens of the old one no longer
	// authenticate) gets a new kubeconfig, which works.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: provisioned, Name: spacerequest.ServiceAccountName}}
	g.Expect(c.Delete(ctx, sa)).To(Succeed())
	oldKubeconfig := secret.Data[toolchainv1alpha1.AdminKubeconfigKey]
	g.Eventually(func(g Gomega) []byte {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		return secret.Data[toolchainv1alpha1.AdminKubeconfigKey]
	}).WithTimeout(timeout).WithPolling(interval).ShouldNot(Equal(oldKubeconfig))
	cfg, err = clientcmd.RESTConfigFromKubeConfig(secret.Data[toolchainv1alpha1.AdminKubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	renewed, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return renewed.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: provisioned, Name: "renewed"}})
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// Deletion: Terminating while the namespace goes; envtest has no
	// namespace controller, so it never goes by itself. Terminating lasts
	// only the termination timeout (4s, less the deletionTimestamp's
	// rounding to the second): the stub's clock is stopped (before the
	// deletion, so that less than a second of it has passed) to keep it
	// there, however slow the machine.
	stubClock.stop(t)
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonTerminating))
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: team, Name: "staging-kubeconfig"}, &corev1.Secret{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the kubeconfig Secret is deleted")
	g.Expect(reason(key)(g)).To(Equal(toolchainv1alpha1.ReasonTerminating), "still within the termination timeout")

	// After the termination timeout: UnableToTerminate, finalizer kept; its
	// lastTransitionTime is when UnableToTerminate began (Terminating →
	// UnableToTerminate keeps Ready False, and the dt-binder's deadline
	// counts from it).
	stubClock.resume()
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonUnableToTerminate))
	g.Expect(c.Get(ctx, key, sr)).To(Succeed())
	cond = ready(g, key)
	g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(cond.Message).To(ContainSubstring(provisioned))
	g.Expect(cond.LastTransitionTime.Time).To(BeTemporally(">=", sr.DeletionTimestamp.Add(terminationTimeout)),
		"lastTransitionTime is when UnableToTerminate began, not when Ready went False")

	// The namespace finally goes (what the namespace controller would do):
	// the SpaceRequest is released.
	finalizeNamespace(t, g, provisioned)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the SpaceRequest is gone")
}

// finalizeNamespace removes the "kubernetes" finalizer of a terminating
// namespace through its /finalize subresource, as kube-controller-manager's
// namespace controller does once the namespace is empty.
func finalizeNamespace(t *testing.T, g Gomega, name string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	ns.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

// TestForeignNamespaceIsNotTakenOver: a namespace the stub did not create is
// never adopted; the SpaceRequest says why it is not ready.
func TestForeignNamespaceIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	team := unique("team-b")
	createNamespace(t, g, team)
	createNamespace(t, g, nsName(team, "dev"))
	sr := newSpaceRequest(team, "dev")
	g.Expect(env.Client.Create(ctx, sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(func(g Gomega) string {
		c := ready(g, key)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(toolchainv1alpha1.ReasonProvisioning))
		return c.Message
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("already exists"))
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nsName(team, "dev")}, ns)).To(Succeed())
	g.Expect(ns.Annotations).NotTo(HaveKey(spacerequest.SpaceRequestAnnotation))

	// Deleting it leaves the foreign namespace alone and completes.
	g.Expect(env.Client.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nsName(team, "dev")}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil())
}

func TestNamespaceNamesAreValidAndDeterministic(t *testing.T) {
	g := NewWithT(t)
	long := newSpaceRequest("a-rather-long-namespace-name-for-a-team", "and.an-even-longer-space-request-name-that-goes-on")
	n := spacerequest.NamespaceName(long)
	g.Expect(len(n)).To(BeNumerically("<=", 63))
	g.Expect(n).NotTo(ContainSubstring("."))
	g.Expect(n).To(Equal(spacerequest.NamespaceName(long.DeepCopy())))
	other := long.DeepCopy()
	other.Name += "x"
	g.Expect(spacerequest.NamespaceName(other)).NotTo(Equal(n))
	g.Expect(strings.HasPrefix(n, "a-rather-long-namespace-name-for-a-team-and-an")).To(BeTrue())
	g.Expect(spacerequest.NamespaceName(newSpaceRequest("ns", "sr"))).To(MatchRegexp(`^ns-sr-[0-9a-f]{16}$`))
	// Alike to read, different SpaceRequests: different namespaces.
	g.Expect(spacerequest.NamespaceName(newSpaceRequest("a-b", "c"))).NotTo(Equal(spacerequest.NamespaceName(newSpaceRequest("a", "b-c"))))
}

// TestTierAndTargetClusterRolesAreIgnored: the stub provisions the same for
// every SpaceRequest. spec.tierName (any tier) and spec.targetClusterRoles
// (host-operator picks the member cluster with them; the stub has one) are
// accepted and change nothing; a change of them is observed (generation) and
// still changes nothing.
func TestTierAndTargetClusterRolesAreIgnored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-tier")
	createNamespace(t, g, team)
	sr := newSpaceRequest(team, "env")
	sr.Spec.TierName = "base1ns"
	sr.Spec.TargetClusterRoles = []string{"cluster-role.toolchain.dev.openshift.com/tenant"}
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(c.Get(ctx, key, sr)).To(Succeed())
	access := []toolchainv1alpha1.NamespaceAccess{{Name: nsName(team, "env"), SecretRef: "env-kubeconfig"}}
	g.Expect(sr.Status.NamespaceAccess).To(Equal(access))
	g.Expect(sr.Status.TargetClusterURL).To(Equal(env.Config.Host))

	base := sr.DeepCopy()
	sr.Spec.TierName = "appstudio-env"
	sr.Spec.TargetClusterRoles = []string{"cluster-role.toolchain.dev.openshift.com/other"}
	g.Expect(c.Patch(ctx, sr, client.MergeFrom(base))).To(Succeed())
	g.Eventually(func(g Gomega) int64 {
		g.Expect(c.Get(ctx, key, sr)).To(Succeed())
		return sr.Status.ObservedGeneration
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal(sr.Generation))
	g.Expect(reason(key)(g)).To(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(sr.Status.NamespaceAccess).To(Equal(access))
}
