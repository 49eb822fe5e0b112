package lib_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

// Tracing is process-global (tracing.Install); the tests of this package run
// one at a time, and the ones below look only at their own namespace.

// reconcileSpans returns the deployer's reconcile spans of one item.
func reconcileSpans(rec *tracetest.SpanRecorder, ns, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "DeployItem.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrName)) == name {
			out = append(out, s)
		}
	}
	return out
}

// handOver does what the execution controller does: reconcile-time (with
// milliseconds) and the extra annotations in one write, then status.jobID.
func handOver(g *WithT, di *lsv1alpha1.DeployItem, job string, annotations map[string]string) {
	ctx := context.Background()
	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[lsv1alpha1.ReconcileTimeAnnotation] = time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
		for k, v := range annotations {
			cur.Annotations[k] = v
		}
	})).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Status.JobID = job
	g.Expect(env.Client.Status().Patch(ctx, cur, patch, client.FieldOwner("execution-controller"))).To(Succeed())
}

func pickups(g *WithT, deployer string) uint64 {
	return observabilitytest.HistogramCount(g, "terrace_deployitem_pickup_latency_seconds", map[string]string{"deployer": deployer})
}

func jobCounter(g *WithT, name, result string) float64 {
	labels := map[string]string{"kind": lib.Kind}
	if result != "" {
		labels["result"] = result
	}
	return observabilitytest.Counter(g, name, labels)
}

// The deployer continues the trace the execution handed over with the job:
// its reconcile spans are children of the hand-over span, its work is a
// DeployItem.Apply span, and it leaves the annotation as it was handed.
func TestHandedOverTraceIsContinued(t *testing.T) {
	rec := tracingtest.Record(t)
	ns, g := setup(t, nil)
	ctx := context.Background()
	di := newItem(ns, "handed")
	di.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())

	// The execution controller's span that hands the job over.
	hctx, handing := otel.Tracer("test").Start(ctx, "Execution.Progressing")
	annotation := tracing.Inject(hctx, nil)[tracing.TraceContextAnnotation]
	handing.End()
	g.Expect(annotation).NotTo(BeEmpty())
	beforePickups := pickups(g, "recorder")
	handOver(g, di, "job-1", map[string]string{tracing.TraceContextAnnotation: annotation})
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))

	traceID, parent := handing.SpanContext().TraceID(), handing.SpanContext().SpanID()
	g.Eventually(func(g Gomega) {
		var started, applied bool
		reconciles := map[string]bool{}
		for _, s := range reconcileSpans(rec, ns, "handed") {
			if tracingtest.Attr(s, string(tracing.AttrJobID)) != "job-1" {
				continue
			}
			g.Expect(s.SpanContext().TraceID()).To(Equal(traceID))
			g.Expect(s.Parent().SpanID()).To(Equal(parent), "every reconcile of the job is a child of the hand-over span")
			g.Expect(tracingtest.Attr(s, "deployer")).To(Equal("recorder"))
			g.Expect(tracingtest.Attr(s, string(tracing.AttrKind))).To(Equal(lib.Kind))
			// The reconcile that starts the job also does the work (a
			// synchronous deployer): it ends Succeeded.
			started = started || tracingtest.Attr(s, string(tracing.AttrPhase)) == string(lsv1alpha1.PhaseSucceeded)
			reconciles[s.SpanContext().SpanID().String()] = true
		}
		for _, s := range rec.Ended() {
			if s.Name() == "DeployItem.Apply" && reconciles[s.Parent().SpanID().String()] {
				applied = true
				g.Expect(tracingtest.Attr(s, "deployer")).To(Equal("recorder"))
			}
		}
		g.Expect(started).To(BeTrue(), "the reconcile that started the job")
		g.Expect(applied).To(BeTrue(), "the deployer's work in a child span")
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(get(g, di)().Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, annotation))
	// The reconcile span ends in a deferred call that runs before the one
	// recording the pickup: wait for the measurement (bounded), do not
	// expect it the moment the span is seen.
	g.Eventually(func() uint64 { return pickups(g, "recorder") }, timeout, interval).
		Should(Equal(beforePickups+1), "one pickup measured")
}

// A job the deployer starts itself (here: a new generation of an item no
// execution manages) is a trace of its own: the reconcile that starts it is
// the root, and the item carries it for the reconciles that follow within
// the job (here the work stays pending for a while). A reconcile after the
// job finished (an annotation changed) belongs to no job: it is a trace of
// its own, without a job ID, so an item's trace does not grow for ever.
func TestOwnJobIsATraceOfItsOwn(t *testing.T) {
	traces := tracingtest.Record(t)
	ns, g := setup(t, &behaviour{pending: true})
	di := newItem(ns, "own")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	// The work is done in a later reconcile of the job.
	rec.set(ns, &behaviour{})
	annotate(g, get(g, di)(), "example.com/poke", "0")
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	cur := get(g, di)()
	job := cur.Status.JobID
	annotation := cur.Annotations[tracing.TraceContextAnnotation]
	g.Expect(annotation).NotTo(BeEmpty())

	var root sdktrace.ReadOnlySpan
	g.Eventually(func(g Gomega) {
		root = nil
		n := 0
		for _, s := range reconcileSpans(traces, ns, "own") {
			if tracingtest.Attr(s, string(tracing.AttrJobID)) != job {
				continue
			}
			n++
			if !s.Parent().IsValid() {
				g.Expect(root).To(BeNil(), "one root")
				root = s
			}
		}
		g.Expect(root).NotTo(BeNil())
		g.Expect(n).To(BeNumerically(">=", 2))
		g.Expect(annotation).To(ContainSubstring(root.SpanContext().TraceID().String() + "-" + root.SpanContext().SpanID().String()))
		for _, s := range reconcileSpans(traces, ns, "own") {
			if tracingtest.Attr(s, string(tracing.AttrJobID)) == job {
				g.Expect(s.SpanContext().TraceID()).To(Equal(root.SpanContext().TraceID()))
			}
		}
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	before := len(reconcileSpans(traces, ns, "own"))
	annotate(g, get(g, di)(), "example.com/poke", "1")
	g.Eventually(func(g Gomega) {
		spans := reconcileSpans(traces, ns, "own")
		g.Expect(len(spans)).To(BeNumerically(">", before))
		for _, s := range spans[before:] {
			g.Expect(s.SpanContext().TraceID()).NotTo(Equal(root.SpanContext().TraceID()), "a reconcile outside the job is not in its trace")
			g.Expect(s.Parent().IsValid()).To(BeFalse())
			g.Expect(tracingtest.Attr(s, string(tracing.AttrJobID))).To(BeEmpty())
		}
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(get(g, di)().Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, annotation), "the job's trace context stays")
}

// With tracing off the deployer never writes the annotation: not for jobs it
// starts itself, not for a job handed over.
func TestNoTraceAnnotationWhileTracingOff(t *testing.T) {
	tracing.Install(nil)
	ns, g := setup(t, nil)
	ctx := context.Background()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	aw := tracingtest.WatchAnnotations(t, wc, ns, &lsv1alpha1.DeployItemList{})

	own := newItem(ns, "own")
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	// Read before the annotation: the new job may be over by the next read.
	first := get(g, own)().Status.JobID
	annotate(g, own, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished(),
		WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobID }, Not(Equal(first)))))
	handed := newItem(ns, "handed")
	handed.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, handed)).To(Succeed())
	handOver(g, handed, "job-1", nil)
	g.Eventually(get(g, handed), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Expect(env.Client.Delete(ctx, own)).To(Succeed())
	g.Eventually(aw.Deleted, timeout, interval).Should(ContainElement("own"))
	g.Expect(aw.Annotated()).To(BeEmpty())
}

// Job metrics: a job started and finished is counted (kind DeployItem), the
// item's phase series shows its phase and goes with the item.
func TestJobMetricsAndPhaseSeries(t *testing.T) {
	tracing.Install(nil)
	ns, g := setup(t, nil)
	ctx := context.Background()
	startedBefore := jobCounter(g, "terrace_jobs_started_total", "")
	finishedBefore := jobCounter(g, "terrace_jobs_finished_total", string(lsv1alpha1.PhaseSucceeded))
	di := newItem(ns, "counted")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Eventually(func() float64 { return jobCounter(g, "terrace_jobs_started_total", "") }, timeout, interval).
		Should(BeNumerically(">=", startedBefore+1))
	g.Eventually(func() float64 { return jobCounter(g, "terrace_jobs_finished_total", string(lsv1alpha1.PhaseSucceeded)) }, timeout, interval).
		Should(BeNumerically(">=", finishedBefore+1))
	g.Eventually(func() []string { return observabilitytest.PhaseSeries(g, ns) }, timeout, interval).Should(ConsistOf("DeployItem counted Succeeded"))
	n, err := promtestutil.GatherAndCount(ctrlmetrics.Registry, "terrace_job_duration_seconds")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 1))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{}))
	}, timeout, interval).Should(BeTrue())
	g.Eventually(func() []string { return observabilitytest.PhaseSeries(g, ns) }, timeout, interval).Should(BeEmpty())
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, "counted") }, timeout, interval).Should(ContainElement("Normal/Deleted"))
}

// Events (outcomes and problems only): a success is one Succeeded; a failure names
// its cause (the lastError reason) and the transition (Failed).
func TestEventsOnTransitions(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	ok := newItem(ns, "ok")
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	g.Eventually(get(g, ok), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, "ok") }, timeout, interval).
		Should(ConsistOf("Normal/Succeeded"))

	bad, _ := setup(t, &behaviour{fail: lib.ConfigError("BadThing", "spec.config.thing: is bad")})
	di := newItem(bad, "bad")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, bad, "bad") }, timeout, interval).
		Should(ConsistOf("Warning/BadThing", "Warning/Failed"))
	for _, e := range observabilitytest.Events(g, env.Client, bad, "bad") {
		g.Expect(strings.Count(strings.Join(observabilitytest.Events(g, env.Client, bad, "bad"), "\n"), e)).To(Equal(1), e)
	}
}
