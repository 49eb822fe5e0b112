package manifest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
)

// targetProxy stands between the deployer and the test API server for the
// Target it serves: the test plays another writer at an exact moment — after
// the deployer read an object and before its write reaches the API server.
type targetProxy struct {
	mu       sync.Mutex
	match    func(*http.Request) bool
	before   func() error
	fired    bool
	err      error
	requests []string
}

// proxiedTarget creates the Target ns/name whose cluster is the test API
// server behind a targetProxy.
func proxiedTarget(t *testing.T, g *WithT, ns, name string) *targetProxy {
	t.Helper()
	upstream, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	p := &targetProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(upstream) }, Transport: transport}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		var before func() error
		if p.before != nil && p.match(r) {
			before, p.before, p.fired = p.before, nil, true
		}
		p.mu.Unlock()
		if before != nil {
			err := before()
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\ncontexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n", srv.URL)
	cfg, err := json.Marshal(map[string]string{"kubeconfig": kubeconfig})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	})).To(Succeed())
	return p
}

// once runs before ahead of the first request match accepts.
func (p *targetProxy) once(match func(*http.Request) bool, before func() error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.before, p.fired, p.err = match, before, false, nil
}

// played reports the outcome of the write once played: an error if it did
// not run or failed.
func (p *targetProxy) played() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fired {
		return errors.New("the other writer did not play: no matching request")
	}
	return p.err
}

// writes counts the write requests for the ConfigMap ns/name so far.
func (p *targetProxy) writes(ns, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if r == "POST /api/v1/namespaces/"+ns+"/configmaps" || r == "PATCH /api/v1/namespaces/"+ns+"/configmaps/"+name ||
			r == "PUT /api/v1/namespaces/"+ns+"/configmaps/"+name || r == "DELETE /api/v1/namespaces/"+ns+"/configmaps/"+name {
			n++
		}
	}
	return n
}

// reads counts the read requests for the ConfigMap ns/name so far.
func (p *targetProxy) reads(ns, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if r == "GET /api/v1/namespaces/"+ns+"/configmaps/"+name {
			n++
		}
	}
	return n
}

// writeOf matches a write request (create, apply, patch, delete) for the
// ConfigMap ns/name; a create names the object in its body only, so any
// ConfigMap create in ns matches.
func writeOf(method, ns, name string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if r.Method != method {
			return false
		}
		if method == http.MethodPost {
			return r.URL.Path == "/api/v1/namespaces/"+ns+"/configmaps"
		}
		return r.URL.Path == "/api/v1/namespaces/"+ns+"/configmaps/"+name
	}
}

// createOrApplyOf matches the deployer writing the absent ConfigMap ns/name:
// a create, or (the code before the fix) a server-side apply.
func createOrApplyOf(ns, name string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return writeOf(http.MethodPost, ns, name)(r) || writeOf(http.MethodPatch, ns, name)(r)
	}
}

// applyOf matches a server-side apply of the ConfigMap ns/name.
func applyOf(ns, name string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return writeOf(http.MethodPatch, ns, name)(r) && strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch")
	}
}

// applyAsItem writes the ConfigMap ns/name as the manifest deployer does for
// the item ns/item with policy manage: a forced server-side apply with the
// deployer's field manager and the item's mark.
func applyAsItem(ns, name, item string, data map[string]string) func() error {
	return func() error {
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(cm(ns, name, data)), &obj.Object); err != nil {
			return err
		}
		obj.SetAnnotations(map[string]string{manifest.ManagedByAnnotation: ns + "/" + item})
		return env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(manifest.DefaultName), client.ForceOwnership)
	}
}

// TestFallbackCreateDoesNotTakeOverAnObjectCreatedMeanwhile: two fallback
// items list the same absent object; the other item creates it after this
// item read it (not found) and before this item's write. This item's write
// must not take it over: it creates, finds it exists, reads it again and
// leaves the other item's object alone. One read and one write for an absent
// object, as before.
func TestFallbackCreateDoesNotTakeOverAnObjectCreatedMeanwhile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")

	// Normal path: an absent fallback object costs one write.
	own := item(ns, "own", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "own", map[string]string{"v": "own"})+`}]`))
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	g.Eventually(get(g, own), timeout, interval).Should(succeeded())
	g.Expect(p.writes(ns, "own")).To(Equal(1))
	g.Expect(managedBy(g, ns, "own")()).To(Equal(ns + "/own"))

	p.once(createOrApplyOf(ns, "shared"), applyAsItem(ns, "shared", "a", map[string]string{"v": "a"}))
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "shared", map[string]string{"v": "b"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(p.played()).To(Succeed())
	g.Expect(managedBy(g, ns, "shared")()).To(Equal(ns+"/a"), "b does not take over what a created meanwhile")
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}))
	g.Expect(recorded(g, b)()).NotTo(ContainElement("ConfigMap "+ns+"/shared"), "not b's: not recorded")

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}))
}

// TestImmutableCreateDoesNotChangeAnObjectCreatedMeanwhile: somebody creates
// an immutable item's absent object after the item read it (not found) and
// before the item's write. Immutable never changes an existing object: the
// item creates, finds it exists, reads it again and leaves it as it is — not
// taken over, not overwritten, not marked — and records it, as any existing
// immutable object. One read and one write for an absent object, as before.
func TestImmutableCreateDoesNotChangeAnObjectCreatedMeanwhile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")

	// Normal path: an absent immutable object costs one read and one write.
	own := item(ns, "own", "t", v2(`"manifests":[{"policy":"immutable","manifest":`+cm(ns, "own", map[string]string{"v": "own"})+`}]`))
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	g.Eventually(get(g, own), timeout, interval).Should(succeeded())
	g.Expect(p.reads(ns, "own")).To(Equal(1))
	g.Expect(p.writes(ns, "own")).To(Equal(1))
	g.Expect(configMap(g, ns, "own")()).To(Equal(map[string]string{"v": "own"}))
	g.Expect(managedBy(g, ns, "own")()).To(Equal(ns + "/own"))

	writesBefore := p.writes(ns, "theirs") // creates in ns count for every name
	p.once(createOrApplyOf(ns, "theirs"), func() error {
		return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}, Data: map[string]string{"v": "theirs"}},
			client.FieldOwner("someone-else"))
	})
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"immutable","manifest":`+cm(ns, "theirs", map[string]string{"v": "b"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(p.played()).To(Succeed())
	g.Expect(configMap(g, ns, "theirs")()).To(Equal(map[string]string{"v": "theirs"}), "immutable never changes an existing object")
	g.Expect(managedBy(g, ns, "theirs")()).To(BeEmpty(), "nor takes it over")
	c := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, c)).To(Succeed())
	g.Expect(fieldManagers(c)).To(ConsistOf("someone-else"))
	g.Expect(recorded(g, b)()).To(ConsistOf("ConfigMap "+ns+"/theirs"), "recorded as any existing immutable object")
	g.Expect(p.writes(ns, "theirs")-writesBefore).To(Equal(1), "the create that found it exists; nothing after it")
	g.Expect(p.reads(ns, "theirs")).To(Equal(2), "read, and read again after the create found it exists")

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "theirs")()).To(Equal(map[string]string{"v": "theirs"}))
}

// TestFallbackApplyDoesNotTakeBackAnObjectTakenOverMeanwhile: a fallback
// item's own object is taken over by another item (policy manage) after the
// fallback item read it and before its apply. The apply is conditional on what
// was read: it fails, the object is read again and left to the other item.
func TestFallbackApplyDoesNotTakeBackAnObjectTakenOverMeanwhile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"v": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(managedBy(g, ns, "x")()).To(Equal(ns + "/b"))

	p.once(applyOf(ns, "x"), applyAsItem(ns, "x", "c", map[string]string{"v": "c"}))
	reconfigure(g, b, v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"v": "2"})+`}]`))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(p.played()).To(Succeed())
	g.Expect(managedBy(g, ns, "x")()).To(Equal(ns+"/c"), "b does not take back what c took over meanwhile")
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"v": "c"}))

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"v": "c"}))
}

// TestDeletionDoesNotDeleteAnObjectTakenOverMeanwhile: while an item is
// deleted, another item takes its object over after the deletion read it and
// before the delete request. The delete is conditional on what was read: it
// fails, the object is read again and left to the other item.
func TestDeletionDoesNotDeleteAnObjectTakenOverMeanwhile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "x", map[string]string{"v": "b"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())

	p.once(writeOf(http.MethodDelete, ns, "x"), applyAsItem(ns, "x", "c", map[string]string{"v": "c"}))
	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(p.played()).To(Succeed())
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"v": "c"}), "the object c took over meanwhile stays")
	g.Expect(managedBy(g, ns, "x")()).To(Equal(ns + "/c"))
}

// unmark removes the ManagedByAnnotation from the ConfigMap ns/name, as
// objects applied by a deployer version without marks look after the
// upgrade: the deployer's field manager still owns their fields.
func unmark(g *WithT, ns, name string) {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := []byte(`[{"op":"remove","path":"/metadata/annotations/` + strings.ReplaceAll(manifest.ManagedByAnnotation, "/", "~1") + `"}]`)
	g.Expect(env.Client.Patch(context.Background(), c, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner("upgrade-test"))).To(Succeed())
	g.Expect(c.Annotations).NotTo(HaveKey(manifest.ManagedByAnnotation))
	g.Expect(fieldManagers(c)).To(ContainElement(manifest.DefaultName))
}

func fieldManagers(obj client.Object) []string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		out = append(out, mf.Manager)
	}
	return out
}

// TestFallbackAdoptsItsObjectsFromBeforeMarks: objects a fallback item
// applied before objects were marked carry no mark. The item adopts those of
// them that its record lists and whose fields the deployer's field manager
// owns: it updates and marks them, and deletes them when they leave its
// configuration or the item is deleted. An unmarked object without the
// deployer's fields (somebody else's) stays alone even though it is recorded.
func TestFallbackAdoptsItsObjectsFromBeforeMarks(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	config := func(v string, names ...string) string {
		var ms []string
		for _, n := range names {
			ms = append(ms, `{"policy":"fallback","manifest":`+cm(ns, n, map[string]string{"v": v})+`}`)
		}
		return v2(`"manifests":[` + strings.Join(ms, ",") + `]`)
	}
	b := item(ns, "b", "t", config("1", "x", "y", "z"))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(recorded(g, b)()).To(ConsistOf("ConfigMap "+ns+"/x", "ConfigMap "+ns+"/y", "ConfigMap "+ns+"/z"))

	// The upgrade: x and y are the deployer's but unmarked; z is somebody
	// else's now (no mark, none of the deployer's fields).
	unmark(g, ns, "x")
	unmark(g, ns, "y")
	z := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "z"}, z)).To(Succeed())
	delete(z.Annotations, manifest.ManagedByAnnotation)
	z.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	g.Expect(env.Client.Update(ctx, z, client.FieldOwner("someone-else"))).To(Succeed())
	g.Expect(fieldManagers(z)).NotTo(ContainElement(manifest.DefaultName))

	// x is updated and marked, y (dropped) deleted, z left alone.
	reconfigure(g, b, config("2", "x", "z"))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"v": "2"}))
	g.Expect(managedBy(g, ns, "x")()).To(Equal(ns + "/b"))
	g.Expect(configMap(g, ns, "y")()).To(BeNil(), "adopted and dropped from the configuration: deleted")
	g.Expect(configMap(g, ns, "z")()).To(Equal(map[string]string{"v": "1"}))
	g.Expect(managedBy(g, ns, "z")()).To(BeEmpty())
	g.Expect(recorded(g, b)()).To(ConsistOf("ConfigMap " + ns + "/x"))

	// Deleting the item deletes an unmarked object of its own as well.
	unmark(g, ns, "x")
	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "x")()).To(BeNil())
	g.Expect(configMap(g, ns, "z")()).To(Equal(map[string]string{"v": "1"}))
}

// TestFallbackDropsFieldsRemovedFromTheManifest: a fallback object is created
// with a create (an update for field ownership, not an apply); a field later
// removed from its manifest is still removed from the object, as for every
// applied object. Handing the fields to the deployer's apply costs one more
// write once, in the first job after the creation.
func TestFallbackDropsFieldsRemovedFromTheManifest(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"a": "1", "b": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(p.writes(ns, "x")).To(Equal(1))

	reconfigure(g, b, v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"a": "2"})+`}]`))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"a": "2"}))
	g.Expect(p.writes(ns, "x")).To(Equal(3))

	reconfigure(g, b, v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"a": "3"})+`}]`))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(3))))
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"a": "3"}))
	g.Expect(p.writes(ns, "x")).To(Equal(4), "one write per job from then on")
}

// TestPolicyChangeToManageDropsFieldsRemovedFromTheManifest: objects created
// under policy immutable and fallback (a create: an update for field
// ownership, not an apply) switch to manage and keep with a field dropped
// from their manifests; the field is removed, as for every applied object.
// The record tells the policy change, so the fields are handed to the
// deployer's apply then (one read and one write once); the normal manage and
// keep path reads nothing.
func TestPolicyChangeToManageDropsFieldsRemovedFromTheManifest(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	config := func(immutableTo, fallbackTo string, data map[string]string) string {
		return v2(`"manifests":[{"policy":"` + immutableTo + `","manifest":` + cm(ns, "immutable", data) + `},` +
			`{"policy":"` + fallbackTo + `","manifest":` + cm(ns, "fallback", data) + `}]`)
	}
	b := item(ns, "b", "t", config("immutable", "fallback", map[string]string{"a": "1", "b": "1"}))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	for _, name := range []string{"immutable", "fallback"} {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "1", "b": "1"}))
		g.Expect(p.reads(ns, name)).To(Equal(1), name)
	}

	// Creates count for every name in ns: count writes from here on.
	writes := map[string]int{}
	for _, name := range []string{"immutable", "fallback"} {
		writes[name] = p.writes(ns, name)
	}
	reconfigure(g, b, config("manage", "keep", map[string]string{"a": "2"}))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	for _, name := range []string{"immutable", "fallback"} {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "2"}), name+": b, dropped from the manifest, is removed")
		g.Expect(p.reads(ns, name)).To(Equal(2), name+": read once on the policy change")
		g.Expect(p.writes(ns, name)-writes[name]).To(Equal(2), name+": the hand-over and the apply")
		writes[name] = p.writes(ns, name)
	}

	reconfigure(g, b, config("manage", "keep", map[string]string{"a": "3"}))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(3))))
	for _, name := range []string{"immutable", "fallback"} {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "3"}))
		g.Expect(p.reads(ns, name)).To(Equal(2), name+": manage and keep read nothing")
		g.Expect(p.writes(ns, name)-writes[name]).To(Equal(1), name+": the apply only")
	}
}

// TestPolicyChangeHandOverIsConditional: somebody else changes the object
// after the deployer read it for the hand-over on a policy change (fallback
// to manage) and before the hand-over's write. The write replaces the field
// ownership as read, so it is conditional on the read resourceVersion: it
// fails, the object is read again and handed over then; the other writer's
// field and its ownership of it stay.
func TestPolicyChangeHandOverIsConditional(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "x", map[string]string{"a": "1", "b": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	writes := p.writes(ns, "x")

	p.once(func(r *http.Request) bool {
		return writeOf(http.MethodPatch, ns, "x")(r) && r.Header.Get("Content-Type") == string(types.JSONPatchType)
	}, func() error {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
		return env.Client.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"data":{"c":"theirs"}}`)), client.FieldOwner("someone-else"))
	})
	reconfigure(g, b, v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "x", map[string]string{"a": "2"})+`}]`))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(p.played()).To(Succeed())
	g.Expect(configMap(g, ns, "x")()).To(Equal(map[string]string{"a": "2", "c": "theirs"}))
	c := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, c)).To(Succeed())
	g.Expect(fieldManagers(c)).To(ContainElement("someone-else"))
	g.Expect(p.reads(ns, "x")).To(Equal(3), "the create's read, then read, and read again after the conflict")
	g.Expect(p.writes(ns, "x")-writes).To(Equal(3), "the failed hand-over, the hand-over and the apply")
}

// recordedStrategies is the updateStrategy the item's record gives each
// object it lists, by name ("" when absent).
func recordedStrategies(g *WithT, di *lsv1alpha1.DeployItem) map[string]string {
	var ps struct {
		ManagedResources []struct {
			UpdateStrategy string `json:"updateStrategy"`
			Resource       struct{ Name string }
		} `json:"managedResources"`
	}
	g.Expect(json.Unmarshal(get(g, di)().Status.ProviderStatus.Raw, &ps)).To(Succeed())
	out := map[string]string{}
	for _, r := range ps.ManagedResources {
		out[r.Resource.Name] = r.UpdateStrategy
	}
	return out
}

// TestStrategyChangeToUpdateDropsFieldsRemovedFromTheManifest: objects an
// item merge-patched (updateStrategy patch: an update for field ownership,
// not an apply) under manage and keep, in both configuration versions, switch
// to updateStrategy update (server-side apply) with a field dropped from
// their manifests; the field is removed, as for every applied object. The
// record says which objects were patched, so their fields are handed to the
// deployer's apply on the switch (one read, one write, once); a steady
// update job reads nothing.
func TestStrategyChangeToUpdateDropsFieldsRemovedFromTheManifest(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	p := proxiedTarget(t, g, ns, "t")
	v2cfg := func(strategy string, data map[string]string) string {
		return v2(`"updateStrategy":"` + strategy + `","manifests":[{"policy":"manage","manifest":` + cm(ns, "manage", data) + `},` +
			`{"policy":"keep","manifest":` + cm(ns, "keep", data) + `}]`)
	}
	v1cfg := func(strategy string, data map[string]string) string {
		return `{"apiVersion":"manifest.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration",` +
			`"updateStrategy":"` + strategy + `","manifests":[` + cm(ns, "v1", data) + `]}`
	}
	b := item(ns, "b", "t", v2cfg("patch", map[string]string{"a": "1"}))
	a := item(ns, "a", "t", v1cfg("patch", map[string]string{"a": "1"}))
	names := []string{"manage", "keep", "v1"}
	// Each job of both items, with the same data; generation counts the jobs.
	job := func(strategy string, data map[string]string, generation int64) {
		reconfigure(g, b, v2cfg(strategy, data))
		reconfigure(g, a, v1cfg(strategy, data))
		for _, di := range []*lsv1alpha1.DeployItem{b, a} {
			g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", generation)))
		}
	}
	for _, di := range []*lsv1alpha1.DeployItem{b, a} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	}
	// Patched now: b is the merge patch's, not the apply's that created them.
	job("patch", map[string]string{"a": "1", "b": "1"}, 2)
	writes := map[string]int{}
	for _, name := range names {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "1", "b": "1"}))
		g.Expect(p.reads(ns, name)).To(Equal(2), name+": patch reads in every job")
		writes[name] = p.writes(ns, name)
	}
	g.Expect(recordedStrategies(g, b)).To(Equal(map[string]string{"manage": "patch", "keep": "patch"}))
	g.Expect(recordedStrategies(g, a)).To(Equal(map[string]string{"v1": "patch"}))

	job("update", map[string]string{"a": "2"}, 3)
	for _, name := range names {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "2"}), name+": b, dropped from the manifest, is removed")
		g.Expect(p.reads(ns, name)).To(Equal(3), name+": read once on the strategy change")
		g.Expect(p.writes(ns, name)-writes[name]).To(Equal(2), name+": the hand-over and the apply")
		writes[name] = p.writes(ns, name)
	}
	g.Expect(recordedStrategies(g, b)).To(Equal(map[string]string{"manage": "", "keep": ""}))
	g.Expect(recordedStrategies(g, a)).To(Equal(map[string]string{"v1": ""}))

	job("update", map[string]string{"a": "3"}, 4)
	for _, name := range names {
		g.Expect(configMap(g, ns, name)()).To(Equal(map[string]string{"a": "3"}))
		g.Expect(p.reads(ns, name)).To(Equal(3), name+": a steady update job reads nothing")
		g.Expect(p.writes(ns, name)-writes[name]).To(Equal(1), name+": the apply only")
	}
}

// TestDeletionWithoutTargetWhenNothingIsDeletable: an item that records only
// objects of policies that are never deleted (keep, immutable), beside an
// ignored one and a fallback object somebody else manages, is deleted after
// its Target went: deleting it would delete nothing.
func TestDeletionWithoutTargetWhenNothingIsDeletable(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}, Data: map[string]string{"v": "theirs"}},
		client.FieldOwner("someone-else"))).To(Succeed())
	di := item(ns, "nothing-deletable", "t", v2(`"manifests":[`+
		`{"policy":"keep","manifest":`+cm(ns, "keep", map[string]string{"v": "1"})+`},`+
		`{"policy":"immutable","manifest":`+cm(ns, "immutable", map[string]string{"v": "1"})+`},`+
		`{"policy":"ignore","manifest":`+cm(ns, "ignore", map[string]string{"v": "1"})+`},`+
		`{"policy":"fallback","manifest":`+cm(ns, "theirs", map[string]string{"v": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	g.Expect(recorded(g, di)()).To(ConsistOf("ConfigMap "+ns+"/keep", "ConfigMap "+ns+"/immutable"))

	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue(), "deleted without its Target: nothing to delete")
	g.Expect(configMap(g, ns, "keep")()).NotTo(BeNil())
	g.Expect(configMap(g, ns, "immutable")()).NotTo(BeNil())
	g.Expect(configMap(g, ns, "theirs")()).To(Equal(map[string]string{"v": "theirs"}))
}
