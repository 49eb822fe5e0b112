package observability_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

// traceOf returns the trace ID in an object's trace-context annotation.
func traceOf(obj client.Object) string {
	sc := tracingtest.HandedOver(obj.GetAnnotations())
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// One root installation's job is one trace: its root is the reconcile that
// started the job; the root's later reconciles, the sub-installations', the
// executions' and the deployer's spans (reconcile and apply) all belong to it,
// each span's parent is in the trace, and every object the job was handed to
// carries the trace in its annotation.
func TestOneJobIsOneTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	job := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded).Status.JobID

	// The trace's root: the reconcile of "root" that started the job.
	var traceID trace.TraceID
	g.Eventually(func(g Gomega) {
		var roots []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "Installation.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrName)) == "root" &&
				tracingtest.Attr(s, string(tracing.AttrJobID)) == job && !s.Parent().IsValid() {
				roots = append(roots, s)
			}
		}
		g.Expect(roots).To(HaveLen(1), "one reconcile started the job and is the trace's root")
		traceID = roots[0].SpanContext().TraceID()
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		inTrace := tracingtest.Trace(rec, traceID)
		reconciled := map[string]bool{}
		applied := 0
		var otherTraces []string
		for _, s := range inTrace {
			if strings.HasSuffix(s.Name(), ".Reconcile") {
				reconciled[tracingtest.Attr(s, string(tracing.AttrKind))+"/"+tracingtest.Attr(s, string(tracing.AttrName))] = true
			}
			if s.Name() == "DeployItem.Apply" && tracingtest.Attr(s, "deployer") == "mock-deployer" {
				applied++
			}
		}
		// Every reconcile of this job, in whichever controller, is in the trace.
		for _, s := range rec.Ended() {
			if tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrJobID)) == job && s.SpanContext().TraceID() != traceID {
				otherTraces = append(otherTraces, s.Name()+" "+tracingtest.Attr(s, string(tracing.AttrName)))
			}
		}
		// Exactly one root span, and every other span's parent in the trace.
		root, err := tracingtest.Connected(inTrace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(root.Name()).To(Equal("Installation.Reconcile"))
		g.Expect(otherTraces).To(BeEmpty(), "reconciles of the job in other traces")
		for _, n := range treeInstallations {
			g.Expect(reconciled).To(HaveKey("Installation/"+n), "installation %s", n)
		}
		for _, n := range treeExecutions {
			g.Expect(reconciled).To(HaveKey("Execution/"+n), "execution %s", n)
		}
		for _, n := range treeItems {
			g.Expect(reconciled).To(HaveKey("DeployItem/"+n), "deploy item %s", n)
		}
		g.Expect(applied).To(BeNumerically(">=", len(treeItems)), "the deployer's apply spans")
		for _, name := range []string{"Installation.Init", "Installation.ObjectsCreated", "Installation.Progressing", "Installation.Completing",
			"Execution.Init", "Execution.Progressing", "Execution.Completing"} {
			found := false
			for _, s := range inTrace {
				found = found || s.Name() == name
			}
			g.Expect(found).To(BeTrue(), "span %s in the trace", name)
		}
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// Every object the job went through carries the trace.
	want := traceID.String()
	for _, n := range treeInstallations {
		inst := &lsv1alpha1.Installation{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, inst)).To(Succeed())
		g.Expect(traceOf(inst)).To(Equal(want), "installation %s", n)
	}
	for _, n := range treeExecutions {
		exec := &lsv1alpha1.Execution{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, exec)).To(Succeed())
		g.Expect(traceOf(exec)).To(Equal(want), "execution %s", n)
	}
	for _, n := range treeItems {
		di := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, di)).To(Succeed())
		g.Expect(traceOf(di)).To(Equal(want), "deploy item %s", n)
	}
}

// The next job of the same root is a new trace, rooted in the reconcile that
// started it, not a continuation of the previous job's.
func TestNextJobIsANewTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	first := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)
	firstTrace := traceOf(first)
	g.Expect(firstTrace).NotTo(BeEmpty())

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+lsv1alpha1.OperationAnnotation+`":"reconcile"}}}`))
	g.Expect(env.Client.Patch(ctx, first, patch)).To(Succeed())
	var second *lsv1alpha1.Installation
	g.Eventually(func(g Gomega) {
		second = getInst(g, ns, "root")
		g.Expect(second.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(second.Status.JobIDFinished).To(Equal(second.Status.JobID))
		g.Expect(second.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	secondTrace := traceOf(second)
	g.Expect(secondTrace).NotTo(BeEmpty())
	g.Expect(secondTrace).NotTo(Equal(firstTrace))

	// Spans of the second job are in the second trace only.
	g.Eventually(func(g Gomega) {
		n := 0
		for _, s := range rec.Ended() {
			if tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrJobID)) == second.Status.JobID {
				g.Expect(s.SpanContext().TraceID().String()).To(Equal(secondTrace), "%s %s", s.Name(), tracingtest.Attr(s, string(tracing.AttrName)))
				n++
			}
		}
		g.Expect(n).To(BeNumerically(">=", len(treeInstallations)+len(treeExecutions)+len(treeItems)))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	sub := getInst(g, ns, "root-b")
	g.Expect(traceOf(sub)).To(Equal(secondTrace))
}

// With tracing off, no installation, execution or deploy item ever carries
// the trace-context annotation: not through two jobs, nor through deletion.
func TestNoTraceAnnotationWhileTracingOff(t *testing.T) {
	tracing.Install(nil)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()
	aw := watchAnnotations(t, ns)

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	first := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+lsv1alpha1.OperationAnnotation+`":"reconcile"}}}`))
	g.Expect(env.Client.Patch(ctx, first, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		inst := getInst(g, ns, "root")
		g.Expect(inst.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(inst.Status.JobIDFinished).To(Equal(inst.Status.JobID))
		g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	for _, n := range treeItems {
		di := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, di)).To(Succeed())
		g.Expect(di.Annotations).NotTo(HaveKey(tracing.TraceContextAnnotation))
	}

	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	waitGone(t, ns, "root")
	// The watch saw the objects come, change and go (every item's deletion
	// included), and never with the annotation.
	g.Eventually(func() int64 { return aw.events.Load() }).WithTimeout(timeout).WithPolling(interval).
		Should(BeNumerically(">=", 3*(len(treeInstallations)+len(treeExecutions)+len(treeItems))))
	g.Expect(aw.annotated()).To(BeEmpty())
}
