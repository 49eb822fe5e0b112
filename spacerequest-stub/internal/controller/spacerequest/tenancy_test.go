package spacerequest_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// provisionedAccess waits for the SpaceRequest to be Provisioned and returns
// its namespace and a client built from its kubeconfig Secret (the tenant's
// rights in the namespace: edit).
func provisionedAccess(t *testing.T, g *WithT, sr *toolchainv1alpha1.SpaceRequest) (string, client.Client) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(env.Client.Get(ctx, key, sr)).To(Succeed())
	access := sr.Status.NamespaceAccess[0]
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: sr.Namespace, Name: access.SecretRef}, secret)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[toolchainv1alpha1.AdminKubeconfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	tenant, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	// RBAC takes a moment to see the new RoleBinding.
	g.Eventually(func() error { return tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(access.Name)) }).
		WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return access.Name, tenant
}

// TestNamespaceNamesDoNotCollideAcrossTenants: the SpaceRequests "c" of
// tenant "<t>-b" and "b-c" of tenant "<t>" read alike ("<t>-b-c"); each gets
// a namespace of its own, both Ready, each annotated with its own
// SpaceRequest.
func TestNamespaceNamesDoNotCollideAcrossTenants(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	team := unique("team-collide")
	createNamespace(t, g, team)
	createNamespace(t, g, team+"-b")
	first, second := newSpaceRequest(team+"-b", "c"), newSpaceRequest(team, "b-c")
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	firstNS, _ := provisionedAccess(t, g, first)
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	secondNS, _ := provisionedAccess(t, g, second)

	g.Expect(firstNS).NotTo(Equal(secondNS))
	for ns, sr := range map[string]*toolchainv1alpha1.SpaceRequest{firstNS: first, secondNS: second} {
		got := &corev1.Namespace{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue(spacerequest.SpaceRequestAnnotation, spacerequest.Key(sr)))
		g.Expect(strings.HasPrefix(ns, team+"-b-c-")).To(BeTrue(), "readable: %s", ns)
	}
}

// TestProvisionedNamespaceIsRestrictedAndBounded: the namespace enforces the
// restricted Pod Security profile and carries a ResourceQuota and a
// LimitRange sized by the SpaceRequest's annotation (defaults without one).
// The tenant's kubeconfig (edit) can neither change nor delete them, nor lift
// the namespace's labels; a change of the annotation, and a quota deleted by
// an administrator, are applied again.
func TestProvisionedNamespaceIsRestrictedAndBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-bounded")
	createNamespace(t, g, team)
	sr := newSpaceRequest(team, "env")
	sr.Annotations = map[string]string{toolchainv1alpha1.NamespaceLimitsAnnotation: `{"cpu":"3","pods":"7","containerMemory":"256Mi"}`}
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	// Another tenant's SpaceRequest, without the annotation: the defaults.
	other := unique("team-bounded-other")
	createNamespace(t, g, other)
	otherSR := newSpaceRequest(other, "env")
	g.Expect(c.Create(ctx, otherSR)).To(Succeed())

	ns, tenant := provisionedAccess(t, g, sr)
	namespace := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
	for k, v := range map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": "latest",
		"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
	} {
		g.Expect(namespace.Labels).To(HaveKeyWithValue(k, v))
	}
	quota := &corev1.ResourceQuota{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: spacerequest.ResourceQuotaName}, quota)).To(Succeed())
	g.Expect(quota.Spec.Hard).To(HaveLen(6))
	for name, want := range map[corev1.ResourceName]string{
		corev1.ResourceRequestsCPU: "3", corev1.ResourceLimitsCPU: "3", corev1.ResourcePods: "7",
		corev1.ResourceRequestsMemory: "4Gi", corev1.ResourceLimitsMemory: "4Gi", corev1.ResourceRequestsStorage: "10Gi",
	} {
		g.Expect(quota.Spec.Hard[name]).To(BeComparableTo(resource.MustParse(want)), string(name))
	}
	limits := &corev1.LimitRange{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: spacerequest.LimitRangeName}, limits)).To(Succeed())
	g.Expect(limits.Spec.Limits).To(HaveLen(1))
	g.Expect(limits.Spec.Limits[0].Default.Memory().String()).To(Equal("256Mi"))
	g.Expect(limits.Spec.Limits[0].DefaultRequest.Cpu().String()).To(Equal("100m"))

	// The tenant, with edit in the namespace, cannot loosen any of it.
	forbidden := func(err error, what string) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", what, err)
	}
	loose := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"hard":{"pods":"1000"}}}`))
	forbidden(tenant.Patch(ctx, quota.DeepCopy(), loose), "raising the quota")
	forbidden(tenant.Delete(ctx, quota.DeepCopy()), "deleting the quota")
	forbidden(tenant.Delete(ctx, limits.DeepCopy()), "deleting the limit range")
	forbidden(tenant.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}), "adding a quota")
	forbidden(tenant.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`))),
		"lifting the namespace's Pod Security level")
	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "privileged"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	}
	err := tenant.Create(ctx, privileged)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("PodSecurity \"restricted:latest\""))

	// A change of the annotation is applied; so is a quota an administrator deleted.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	base := sr.DeepCopy()
	sr.Annotations[toolchainv1alpha1.NamespaceLimitsAnnotation] = `{"cpu":"4","pods":"7","containerMemory":"256Mi"}`
	g.Expect(c.Patch(ctx, sr, client.MergeFrom(base))).To(Succeed())
	hardCPU := func(g Gomega) string {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: spacerequest.ResourceQuotaName}, quota)).To(Succeed())
		return quota.Spec.Hard.Name(corev1.ResourceRequestsCPU, resource.DecimalSI).String()
	}
	g.Eventually(hardCPU).WithTimeout(timeout).WithPolling(interval).Should(Equal("4"))
	g.Expect(c.Delete(ctx, quota)).To(Succeed())
	g.Eventually(func(g Gomega) types.UID {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: spacerequest.ResourceQuotaName}, quota)).To(Succeed())
		return quota.UID
	}).WithTimeout(timeout).WithPolling(interval).ShouldNot(BeEmpty())
	g.Expect(hardCPU(g)).To(Equal("4"))

	// The other tenant's namespace is provisioned alike, with the defaults.
	otherNS, _ := provisionedAccess(t, g, otherSR)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: spacerequest.ResourceQuotaName}, quota)).To(Succeed())
	g.Expect(quota.Spec.Hard[corev1.ResourceRequestsCPU]).To(BeComparableTo(resource.MustParse("2")))
}

// TestNamespaceLimitsThatCannotBeGrantedAreRefused: a SpaceRequest asking for
// more than the stub's ceiling, or for limits that do not parse, is not
// provisioned (no namespace); its Ready condition names the bound and its
// flag, and a Warning says so, cut to the bound of an Event's note however
// long the quoted annotation (an Event over it would be refused and lost).
// Another tenant's SpaceRequest is provisioned meanwhile.
func TestNamespaceLimitsThatCannotBeGrantedAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-greedy")
	createNamespace(t, g, team)
	greedy := newSpaceRequest(team, "greedy")
	greedy.Annotations = map[string]string{toolchainv1alpha1.NamespaceLimitsAnnotation: `{"cpu":"1000"}`}
	garbled := newSpaceRequest(team, "garbled")
	garbled.Annotations = map[string]string{toolchainv1alpha1.NamespaceLimitsAnnotation: `{"` + strings.Repeat("x", 3000) + `":"1"}`}
	for _, sr := range []*toolchainv1alpha1.SpaceRequest{greedy, garbled} {
		g.Expect(c.Create(ctx, sr)).To(Succeed())
	}
	message := func(sr *toolchainv1alpha1.SpaceRequest) func(g Gomega) string {
		return func(g Gomega) string {
			cond := ready(g, client.ObjectKeyFromObject(sr))
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(toolchainv1alpha1.ReasonProvisioning))
			return cond.Message
		}
	}
	g.Eventually(message(greedy)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainSubstring("cpu 1k is more than the stub allows (--max-namespace-cpu=16)"))
	g.Eventually(message(garbled)).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("unknown field"))

	notes := func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(c.List(ctx, &list, client.InNamespace(team))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Reason == spacerequest.EventInvalidNamespaceLimits {
				out = append(out, e.Regarding.Name+": "+e.Note)
			}
		}
		return out
	}
	g.Eventually(notes).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		ContainSubstring("greedy: Annotation "+toolchainv1alpha1.NamespaceLimitsAnnotation),
		And(HavePrefix("garbled: Annotation "), WithTransform(func(s string) int { return len(s) - len("garbled: ") },
			BeNumerically("<=", status.MaxEventNote))),
	))
	for _, sr := range []*toolchainv1alpha1.SpaceRequest{greedy, garbled} {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: spacerequest.NamespaceName(sr)}, &corev1.Namespace{})).
			To(WithTransform(apierrors.IsNotFound, BeTrue()), "no namespace for %s", sr.Name)
	}

	modest := newSpaceRequest(team, "modest")
	modest.Annotations = map[string]string{toolchainv1alpha1.NamespaceLimitsAnnotation: `{"cpu":"16"}`}
	g.Expect(c.Create(ctx, modest)).To(Succeed())
	provisionedAccess(t, g, modest)
}
