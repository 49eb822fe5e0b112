package manifest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

// An item whose first apply failed recorded an empty list of managed objects
// (a providerStatus, but nothing in it): it installed nothing, so once its
// Target is gone its deletion still completes instead of failing for want of
// a Target it does not need.
func TestDeletionOfAnItemThatInstalledNothingNeedsNoTarget(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "rejected", "t", v2(`"manifests":[{"manifest":`+cm(ns, "Bad_Name", nil)+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonRejected, lsv1alpha1.ErrorConfigurationProblem, "Bad_Name"))
	cur := get(g, di)()
	g.Expect(cur.Status.ProviderStatus).NotTo(BeNil(), "the failed apply recorded its (empty) list of managed objects")
	g.Expect(recorded(g, di)()).To(BeEmpty())

	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cur)).To(Succeed())
	g.Eventually(gone(g, cur), timeout, interval).Should(BeTrue(), "deleted without its Target: nothing was installed")
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
