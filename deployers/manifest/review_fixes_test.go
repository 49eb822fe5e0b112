package manifest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/manifest"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

func managedBy(g *WithT, ns, name string) func() string {
	return func() string {
		c := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c.Annotations[manifest.ManagedByAnnotation]
	}
}

// TestFallbackIsPerItem: the deployer's field manager is the same for every
// item, so fallback goes by the item that manages an object (its mark), not
// by the field manager. Item a manages ConfigMap "shared"; item b lists it
// with policy fallback and leaves it alone: b neither changes it nor deletes
// it when b is deleted. b's own fallback object is b's. An item with policy
// manage takes "shared" over (as in Landscaper); a, deleted then, leaves
// the object of the item that took it over.
func TestFallbackIsPerItem(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	a := item(ns, "a", "t", v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "shared", map[string]string{"v": "a"})+`}]`))
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(get(g, a), timeout, interval).Should(succeeded())

	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "shared", map[string]string{"v": "b"})+`},`+
		`{"policy":"fallback","manifest":`+cm(ns, "b-own", map[string]string{"v": "b"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}), "b does not take a's object")
	g.Expect(configMap(g, ns, "b-own")()).To(Equal(map[string]string{"v": "b"}))
	g.Expect(managedBy(g, ns, "shared")()).To(Equal(ns + "/a"))
	g.Expect(managedBy(g, ns, "b-own")()).To(Equal(ns + "/b"))
	// A re-apply of b (its own fallback object is updated) still leaves shared alone.
	g.Expect(testutil.Update(ctx, env.Client, get(g, b)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(v2(`"manifests":[{"policy":"fallback","manifest":` + cm(ns, "shared", map[string]string{"v": "b2"}) + `},` +
			`{"policy":"fallback","manifest":` + cm(ns, "b-own", map[string]string{"v": "b2"}) + `}]`))
	})).To(Succeed())
	g.Eventually(configMap(g, ns, "b-own"), timeout, interval).Should(Equal(map[string]string{"v": "b2"}))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}))

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "b-own")()).To(BeNil(), "b's own fallback object goes with b")
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}), "a's object stays")
	g.Expect(recorded(g, a)()).To(ContainElement("ConfigMap " + ns + "/shared"))

	// manage takes over; the object is c's now, and a's deletion leaves it.
	c := item(ns, "c", "t", v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "shared", map[string]string{"v": "c"})+`}]`))
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(get(g, c), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "c"}))
	g.Expect(managedBy(g, ns, "shared")()).To(Equal(ns + "/c"))
	g.Expect(env.Client.Delete(ctx, a)).To(Succeed())
	g.Eventually(gone(g, a), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "c"}), "the object c took over stays")
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(gone(g, c), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "shared")()).To(BeNil())
}

// TestReferenceWithoutNamespace: a readiness check or an export naming an
// object of a namespaced kind without its namespace fails the job at once
// (ERR_CONFIGURATION_PROBLEM, naming the reference) instead of waiting for
// an object nobody can find until the item's timeout. A cluster-scoped kind
// needs no namespace.
func TestReferenceWithoutNamespace(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	manifests := `"manifests":[{"manifest":` + cm(ns, "state", map[string]string{"state": "ready"}) + `},` +
		`{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `-scoped"}}}]`
	check := item(ns, "check", "t", v2(manifests+`,"readinessChecks":{"custom":[{"name":"state-ready",`+
		`"resourceSelector":[{"apiVersion":"v1","kind":"Namespace","name":"`+ns+`-scoped"},{"apiVersion":"v1","kind":"ConfigMap","name":"state"}],`+
		`"requirements":[{"jsonPath":".metadata.name","operator":"exists"}]}]}`))
	export := item(ns, "export", "t", v2(manifests+`,"exports":{"exports":[`+
		`{"key":"ns","jsonPath":".metadata.name","fromResource":{"apiVersion":"v1","kind":"Namespace","name":"`+ns+`-scoped"}},`+
		`{"key":"state","jsonPath":".data.state","fromResource":{"apiVersion":"v1","kind":"ConfigMap","name":"state"}}]}`))
	for _, di := range []*lsv1alpha1.DeployItem{check, export} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}
	// Well within the default timeout (10m): at once.
	g.Eventually(get(g, check), timeout, interval).Should(failedWith(manifest.ReasonReadinessInvalid, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.readinessChecks.custom[0].resourceSelector[1]: ConfigMap state (v1) is namespaced"))
	g.Eventually(get(g, export), timeout, interval).Should(failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.exports.exports[1].fromResource: ConfigMap state (v1) is namespaced"))
}

// TestPendingDeletionBacksOff: a deletion waiting for an object held by a
// finalizer on the target looks again after a growing interval (1 s, then
// half the time since the deletion started, at most 15 s), not every second.
func TestPendingDeletionBacksOff(t *testing.T) {
	spans := tracingtest.Record(t)
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	// The held config map keeps the next deletion group (its namespace) waiting.
	nsName := ns + "-held"
	held := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held","namespace":"` + nsName + `","finalizers":["` + holdFinalizer + `"]}}`
	t.Cleanup(func() { release(NewWithT(t), nsName, "held") })
	di := item(ns, "slow-delete", "t", v2(`"manifests":[{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+nsName+`"}}},{"manifest":`+held+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())

	// The starts of the item's DeleteManifests spans (one per look).
	looks := func() []time.Time {
		var out []time.Time
		for _, s := range spans.Ended() {
			if s.Name() == "DeployItem.DeleteManifests" && isReconcileOf(spans.Ended(), s, ns, "slow-delete") {
				out = append(out, s.StartTime())
			}
		}
		return out
	}
	// A fixed 1 s poll never leaves 2.5 s between two looks; the back-off
	// does once the deletion has waited 5 s.
	g.Eventually(func() time.Duration {
		ts := looks()
		var most time.Duration
		for i := 1; i < len(ts); i++ {
			most = max(most, ts[i].Sub(ts[i-1]))
		}
		return most
	}, timeout, 100*time.Millisecond).Should(BeNumerically(">=", 2500*time.Millisecond))
	g.Expect(get(g, di)().Status.Phase).To(Equal(lsv1alpha1.PhaseDeleting))

	release(g, nsName, "held")
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}

// isReconcileOf reports whether s descends from a DeployItem.Reconcile span of
// the item ns/name among spans.
func isReconcileOf(spans []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan, ns, name string) bool {
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID().String()] = sp
	}
	for p, ok := byID[s.Parent().SpanID().String()]; ok; p, ok = byID[p.Parent().SpanID().String()] {
		if p.Name() == "DeployItem.Reconcile" {
			return tracingtest.Attr(p, "k8s.namespace.name") == ns && tracingtest.Attr(p, "terrace.name") == name
		}
	}
	return false
}
