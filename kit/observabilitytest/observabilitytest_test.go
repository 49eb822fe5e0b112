package observabilitytest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/testenv"
)

func TestMetricHelpers(t *testing.T) {
	g := NewWithT(t)
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "observabilitytest_things_total", Help: "Things."}, []string{"kind", "result"})
	histogram := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "observabilitytest_seconds", Help: "Durations."}, []string{"mode"})
	ctrlmetrics.Registry.MustRegister(counter, histogram)
	t.Cleanup(func() { ctrlmetrics.Registry.Unregister(counter); ctrlmetrics.Registry.Unregister(histogram) })

	g.Expect(Family(g, "observabilitytest_things_total")).To(BeNil(), "no series yet")
	g.Expect(Counter(g, "observabilitytest_things_total", nil)).To(BeZero())
	counter.WithLabelValues("A", "ok").Add(2)
	counter.WithLabelValues("B", "failed").Add(3)
	g.Expect(Family(g, "observabilitytest_things_total").GetMetric()).To(HaveLen(2))
	g.Expect(Counter(g, "observabilitytest_things_total", map[string]string{"kind": "B"})).To(Equal(3.0))
	g.Expect(Counter(g, "observabilitytest_things_total", map[string]string{"kind": "A", "result": "ok"})).To(Equal(2.0))
	g.Expect(Counter(g, "observabilitytest_things_total", map[string]string{"kind": "A", "result": "failed"})).To(BeZero())
	histogram.WithLabelValues("static").Observe(1)
	histogram.WithLabelValues("dynamic").Observe(1)
	histogram.WithLabelValues("dynamic").Observe(2)
	g.Expect(HistogramCount(g, "observabilitytest_seconds", map[string]string{"mode": "dynamic"})).To(Equal(uint64(2)))
	g.Expect(HistogramCount(g, "observabilitytest_seconds", map[string]string{"mode": "none"})).To(BeZero())
	g.Expect(Labels(Family(g, "observabilitytest_seconds").GetMetric()[0])).To(HaveKey("mode"))

	rec := metrics.For("ObservabilityTest")
	rec.Phase("ns-a", "x", "Pending")
	rec.Phase("ns-a", "x", "Ready")
	rec.Phase("ns-a", "y", "Pending")
	rec.Phase("ns-b", "x", "Failed")
	t.Cleanup(func() { rec.Forget("ns-a", "x"); rec.Forget("ns-a", "y"); rec.Forget("ns-b", "x") })
	g.Expect(PhaseSeries(g, "ns-a")).To(ConsistOf("ObservabilityTest x Ready", "ObservabilityTest y Pending"))
	g.Expect(ObjectPhases(g, "ns-a", "ObservabilityTest", "x")).To(Equal([]string{"Ready"}))
	g.Expect(ObjectPhases(g, "ns-a", "Other", "x")).To(BeEmpty())
	g.Expect(testutil.GatherAndCount(InNamespace("ns-b"), PhaseGauge)).To(Equal(1))
	g.Expect(testutil.GatherAndCount(InNamespace("ns-b"), "observabilitytest_things_total")).To(BeZero())
	rec.Forget("ns-b", "x")
	g.Expect(testutil.GatherAndCount(InNamespace("ns-b"))).To(BeZero())
}

func TestEventHelpers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := testenv.StartT(t, nil)
	c := env.Client
	for _, ns := range []string{"ns", "elsewhere", "empty"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	event := func(ns, name, kind, regarding, typ, reason string) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: "example.com/test",
			ReportingInstance:   "test",
			Action:              "Reconcile",
			Regarding:           corev1.ObjectReference{Kind: kind, Namespace: ns, Name: regarding},
			Type:                typ, Reason: reason,
		}
	}
	for _, e := range []*eventsv1.Event{
		event("ns", "e1", "Claim", "obj", "Normal", "Bound"),
		event("ns", "e2", "Claim", "obj", "Warning", "Failed"),
		event("ns", "e3", "Claim", "other", "Normal", "Bound"),
		event("ns", "e5", "Target", "obj", "Normal", "Released"),
		event("elsewhere", "e4", "Claim", "obj", "Warning", "Lost"),
	} {
		g.Expect(c.Create(ctx, e)).To(Succeed())
	}
	g.Expect(Events(g, c, "ns", "obj")).To(ConsistOf("Normal/Bound", "Warning/Failed", "Normal/Released"))
	g.Expect(EventReasons(g, c, "ns", "obj")).To(ConsistOf("Bound", "Failed", "Released"))
	g.Expect(Events(g, c, "ns", "none")).To(BeEmpty())
	g.Expect(NamespaceEvents(g, c, "ns")).To(ConsistOf(
		"Claim/obj Normal Bound", "Claim/obj Warning Failed", "Claim/other Normal Bound", "Target/obj Normal Released"))
	g.Expect(NamespaceEvents(g, c, "empty")).To(BeEmpty())
}
