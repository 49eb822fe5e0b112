package spacerequest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// lastApplied is kubectl's client-side apply annotation, which holds a whole
// Secret applied with kubectl.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

var (
	namespaceGVK      = corev1.SchemeGroupVersion.WithKind("Namespace")
	serviceAccountGVK = corev1.SchemeGroupVersion.WithKind("ServiceAccount")
	roleBindingGVK    = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")
	secretGVK         = corev1.SchemeGroupVersion.WithKind("Secret")
)

// inStubCache reports whether the stub's cache of what it made holds the
// object of kind gvk named key.
func inStubCache(g Gomega, gvk schema.GroupVersionKind, key client.ObjectKey) bool {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	err := stub.Managed.Get(context.Background(), key, o)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// TestOnlyTheStubsObjectsAreCached: the stub lists and watches namespaces,
// ServiceAccounts, RoleBindings and Secrets with its label selector only, so
// its cache holds what it made and nothing else, however many other such
// objects the cluster has (and without kubectl's last-applied annotation).
// What it does not cache it still never takes over: a foreign namespace
// (with a ServiceAccount and RoleBinding of the stub's names in it) and a
// foreign Secret of a kubeconfig's name stay as they are. A provisioned
// namespace that loses the stub's label gets it back.
func TestOnlyTheStubsObjectsAreCached(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-cache")
	createNamespace(t, g, team)
	mine, taken := nsName(team, "mine"), nsName(team, "taken")

	// Foreign objects, without the stub's label: a namespace the
	// SpaceRequest "taken" would get, with a ServiceAccount and RoleBinding
	// of the stub's names in it, and a Secret of the kubeconfig name of the
	// SpaceRequest "clash", applied with kubectl (its data in an annotation).
	createNamespace(t, g, taken)
	foreignSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: spacerequest.ServiceAccountName}}
	foreignRB := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: spacerequest.RoleBindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: taken, Name: "someone"}},
	}
	foreignSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "clash-kubeconfig", Annotations: map[string]string{lastApplied: `{"data":{"password":"c2VjcmV0"}}`}},
		Data:       map[string][]byte{"password": []byte("secret")},
	}
	// And one with the stub's label (made by hand): cached, without the
	// kubectl annotation.
	labelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: team, Name: "labelled",
		Labels:      map[string]string{spacerequest.ManagedByLabel: spacerequest.ManagedByValue},
		Annotations: map[string]string{lastApplied: `{"data":{"password":"c2VjcmV0"}}`, "keep": "me"},
	}}
	for _, o := range []client.Object{foreignSA, foreignRB, foreignSecret, labelled} {
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}

	srs := map[string]*toolchainv1alpha1.SpaceRequest{}
	for _, name := range []string{"mine", "taken", "clash"} {
		srs[name] = newSpaceRequest(team, name)
		g.Expect(c.Create(ctx, srs[name])).To(Succeed())
	}
	message := func(name string) func(g Gomega) string {
		return func(g Gomega) string {
			cond := ready(g, client.ObjectKeyFromObject(srs[name]))
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(toolchainv1alpha1.ReasonProvisioning))
			return cond.Message
		}
	}
	g.Eventually(reason(client.ObjectKeyFromObject(srs["mine"]))).WithTimeout(timeout).WithPolling(interval).
		Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Eventually(message("taken")).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("already exists"))
	g.Eventually(message("clash")).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("was not created for this SpaceRequest"))

	// The cache: what the stub made, nothing else.
	g.Eventually(func(g Gomega) {
		g.Expect(inStubCache(g, namespaceGVK, client.ObjectKey{Name: mine})).To(BeTrue())
		g.Expect(inStubCache(g, serviceAccountGVK, client.ObjectKey{Namespace: mine, Name: spacerequest.ServiceAccountName})).To(BeTrue())
		g.Expect(inStubCache(g, roleBindingGVK, client.ObjectKey{Namespace: mine, Name: spacerequest.RoleBindingName})).To(BeTrue())
		g.Expect(inStubCache(g, secretGVK, client.ObjectKey{Namespace: team, Name: "mine-kubeconfig"})).To(BeTrue())
		g.Expect(inStubCache(g, secretGVK, client.ObjectKeyFromObject(labelled))).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(inStubCache(g, namespaceGVK, client.ObjectKey{Name: taken})).To(BeFalse())
	g.Expect(inStubCache(g, namespaceGVK, client.ObjectKey{Name: team})).To(BeFalse())
	g.Expect(inStubCache(g, namespaceGVK, client.ObjectKey{Name: "default"})).To(BeFalse())
	g.Expect(inStubCache(g, serviceAccountGVK, client.ObjectKeyFromObject(foreignSA))).To(BeFalse())
	g.Expect(inStubCache(g, roleBindingGVK, client.ObjectKeyFromObject(foreignRB))).To(BeFalse())
	g.Expect(inStubCache(g, secretGVK, client.ObjectKeyFromObject(foreignSecret))).To(BeFalse())
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	g.Expect(stub.Managed.List(ctx, secrets, client.InNamespace(team))).To(Succeed())
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
		g.Expect(s.Annotations).NotTo(HaveKey(lastApplied), "kubectl's annotation is not cached")
		g.Expect(s.ManagedFields).To(BeEmpty(), "managedFields are not cached")
	}
	g.Expect(names).To(ConsistOf("mine-kubeconfig", "labelled"))
	cachedLabelled := &metav1.PartialObjectMetadata{}
	cachedLabelled.SetGroupVersionKind(secretGVK)
	g.Expect(stub.Managed.Get(ctx, client.ObjectKeyFromObject(labelled), cachedLabelled)).To(Succeed())
	g.Expect(cachedLabelled.Annotations).To(Equal(map[string]string{"keep": "me"}))

	// It is the API server that filters: every list and watch the stub sent
	// for these kinds selects its label.
	listed := map[string]bool{}
	for _, r := range stubRequests.since(time.Time{}) {
		switch r.resource() {
		case "namespaces", "serviceaccounts", "rolebindings", "secrets":
		default:
			continue
		}
		if v := r.verb(); v != "list" && v != "watch" {
			continue
		}
		listed[r.resource()] = true
		g.Expect(r.url.Query().Get("labelSelector")).To(Equal(spacerequest.ManagedByLabel+"="+spacerequest.ManagedByValue), "request %s", r)
	}
	g.Expect(listed).To(HaveLen(4), "each kind was listed or watched")

	// Nothing foreign was taken over.
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: taken}, ns)).To(Succeed())
	g.Expect(ns.Labels).NotTo(HaveKey(spacerequest.ManagedByLabel))
	g.Expect(ns.Annotations).NotTo(HaveKey(spacerequest.SpaceRequestAnnotation))
	sa := &corev1.ServiceAccount{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreignSA), sa)).To(Succeed())
	g.Expect(sa.Labels).To(BeEmpty())
	g.Expect(sa.Annotations).To(BeEmpty())
	rb := &rbacv1.RoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreignRB), rb)).To(Succeed())
	g.Expect(rb.Labels).To(BeEmpty())
	g.Expect(rb.Subjects).To(Equal(foreignRB.Subjects))
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreignSecret), secret)).To(Succeed())
	g.Expect(secret.Labels).To(BeEmpty())
	g.Expect(secret.Annotations).To(Equal(foreignSecret.Annotations))
	g.Expect(secret.OwnerReferences).To(BeEmpty())
	g.Expect(secret.Data).To(Equal(foreignSecret.Data))
	for _, f := range secret.ManagedFields {
		g.Expect(f.Manager).NotTo(Equal(spacerequest.FieldManager))
	}

	// A provisioned namespace that loses the stub's label leaves the cache
	// (to the stub, a deletion) and gets its label back.
	g.Expect(c.Get(ctx, client.ObjectKey{Name: mine}, ns)).To(Succeed())
	patch := client.MergeFrom(ns.DeepCopy())
	delete(ns.Labels, spacerequest.ManagedByLabel)
	g.Expect(c.Patch(ctx, ns, patch)).To(Succeed())
	g.Eventually(func(g Gomega) map[string]string {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: mine}, ns)).To(Succeed())
		return ns.Labels
	}).WithTimeout(timeout).WithPolling(interval).Should(HaveKeyWithValue(spacerequest.ManagedByLabel, spacerequest.ManagedByValue))
	g.Expect(reason(client.ObjectKeyFromObject(srs["mine"]))(g)).To(Equal(toolchainv1alpha1.ReasonProvisioned))

	// Clean up: every SpaceRequest goes, only the stub's namespaces with it
	// ("clash" got its namespace before it failed at the Secret).
	for _, sr := range srs {
		g.Expect(c.Delete(ctx, sr)).To(Succeed())
	}
	for _, name := range []string{mine, nsName(team, "clash")} {
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
			g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		finalizeNamespace(t, g, name)
	}
	for _, sr := range srs {
		g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(sr), sr)) }).
			WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: taken}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreignSecret), secret)).To(Succeed())
	g.Expect(secret.DeletionTimestamp).To(BeNil())
}

// TestRequestsPerSpaceRequest: provisioning a SpaceRequest costs the stub
// eight API requests, all writes (its reads come from its caches): the
// finalizer, the namespace, ServiceAccount and RoleBinding, the token, the
// kubeconfig Secret, the status and the Provisioned event. Its deletion reads
// no SpaceRequest from the API server. Also when the stub's caches lag behind
// its own writes: the reconcile that its status write wakes may run before
// the watch of Secrets (or namespaces) delivers the one it created just
// before; that costs no read and no second create either.
func TestRequestsPerSpaceRequest(t *testing.T) {
	t.Run("caches current", func(t *testing.T) { requestsPerSpaceRequest(t, 0) })
	// The stub's watches of namespaces and Secrets held back: its caches
	// show the ones it created well after the API server answered.
	t.Run("caches lagging", func(t *testing.T) { requestsPerSpaceRequest(t, 300*time.Millisecond) })
}

func requestsPerSpaceRequest(t *testing.T, lag time.Duration) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-requests")
	createNamespace(t, g, team)
	watchLag.Store(int64(lag))
	t.Cleanup(func() { watchLag.Store(0) })
	start := time.Now()
	sr := newSpaceRequest(team, "env")
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))

	// The requests for this SpaceRequest (a late one of an earlier test's
	// would be in another namespace; a namespace is created with a POST to
	// /api/v1/namespaces).
	requests := func() []string {
		var out []string
		for _, r := range stubRequests.since(start) {
			p := r.url.Path
			if v := r.verb(); v != "list" && v != "watch" &&
				(strings.Contains(p, "/namespaces/"+team+"/") || strings.Contains(p, "/namespaces/"+nsName(team, "env")+"/") || p == "/api/v1/namespaces") {
				out = append(out, strings.ToUpper(v)+" "+r.resource())
			}
		}
		return out
	}
	g.Eventually(requests).WithTimeout(timeout).WithPolling(interval).Should(ContainElement("POST events"))
	g.Consistently(requests).WithTimeout(consistency).WithPolling(interval).Should(ConsistOf(
		"PATCH spacerequests",        // finalizer
		"POST namespaces",            // created, never applied over one that exists
		"PATCH serviceaccounts",      // server-side apply
		"PATCH rolebindings",         // server-side apply
		"PATCH resourcequotas",       // server-side apply
		"PATCH limitranges",          // server-side apply
		"POST serviceaccounts/token", // TokenRequest
		"POST secrets",               // kubeconfig, created
		"PATCH spacerequests/status", // Ready
		"POST events",                // Provisioned
	))

	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: nsName(team, "env")}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	finalizeNamespace(t, g, nsName(team, "env"))
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, sr)) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	// Once the SpaceRequest is gone, the stub looks for a namespace it left
	// behind (a force-deleted SpaceRequest) in its cache only: it asks the
	// API server whether the SpaceRequest is gone only when its cache holds
	// such a namespace, which the normal deletion never leaves.
	reads := func() []string {
		var out []string
		for _, r := range stubRequests.since(start) {
			if v := r.verb(); (v == "get" || v == "list") && strings.Contains(r.url.Path, "/namespaces/"+team+"/spacerequests") {
				out = append(out, r.String())
			}
		}
		return out
	}
	g.Consistently(reads).WithTimeout(consistency).WithPolling(interval).Should(BeEmpty())
}
