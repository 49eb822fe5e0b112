package observability_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
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
// started the job; the root's later reconciles and the sub-installations'
// belong to it, each span's parent is in the trace, and every object the job
// was handed to (installations, executions) carries the trace in its
// annotation, for the execution controller and the deployers to continue.
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
			if isJobRoot(s, ns, "root") && tracingtest.Attr(s, string(tracing.AttrJobID)) == job {
				roots = append(roots, s)
			}
		}
		g.Expect(roots).To(HaveLen(1), "one reconcile started the job and is the trace's root")
		traceID = roots[0].SpanContext().TraceID()
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		inTrace := tracingtest.Trace(rec, traceID)
		reconciled := map[string]bool{}
		var otherTraces []string
		for _, s := range inTrace {
			if strings.HasSuffix(s.Name(), ".Reconcile") {
				reconciled[tracingtest.Attr(s, string(tracing.AttrKind))+"/"+tracingtest.Attr(s, string(tracing.AttrName))] = true
			}
		}
		// Every reconcile of this job is in the trace.
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
		for _, name := range []string{"Installation.Init", "Installation.ObjectsCreated", "Installation.Progressing", "Installation.Completing"} {
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
		g.Expect(n).To(BeNumerically(">=", len(treeInstallations)))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	sub := getInst(g, ns, "root-b")
	g.Expect(traceOf(sub)).To(Equal(secondTrace))
}

// With tracing off, no installation or execution ever carries the
// trace-context annotation: not through two jobs, nor through deletion.
func TestNoTraceAnnotationWhileTracingOff(t *testing.T) {
	tracing.Install(nil)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()
	aw := tracingtest.WatchAnnotations(t, watchClient(t), ns, &lsv1alpha1.InstallationList{}, &lsv1alpha1.ExecutionList{})

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

	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	waitGone(t, ns, "root")
	// The watch saw the objects come, change and go, and never with the
	// annotation.
	g.Eventually(aw.Seen).WithTimeout(timeout).WithPolling(interval).
		Should(BeNumerically(">=", 3*(len(treeInstallations)+len(treeExecutions))))
	g.Expect(aw.Annotated()).To(BeEmpty())
}

// deletionWatch records, for every installation and execution of a
// namespace, the trace in its trace-context annotation on the first version
// the API server showed with a deletion timestamp: the trace its deletion
// reconciles continue, whichever controller runs them.
type deletionWatch struct {
	mu     sync.Mutex
	traces map[string]string // "<Kind>/<name>" → trace ID ("" without annotation)
}

func watchDeletions(t *testing.T, ns string) *deletionWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dw := &deletionWatch{traces: map[string]string{}}
	for _, list := range []client.ObjectList{&lsv1alpha1.InstallationList{}, &lsv1alpha1.ExecutionList{}} {
		w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark || obj.GetDeletionTimestamp() == nil {
					continue
				}
				kind := "Installation"
				if _, ok := obj.(*lsv1alpha1.Execution); ok {
					kind = "Execution"
				}
				key := kind + "/" + obj.GetName()
				dw.mu.Lock()
				if _, seen := dw.traces[key]; !seen {
					dw.traces[key] = traceOf(obj)
				}
				dw.mu.Unlock()
			}
		}()
	}
	return dw
}

// deleted returns what the watch recorded so far.
func (dw *deletionWatch) deleted() map[string]string {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return maps.Clone(dw.traces)
}

// isDeletionSpan reports whether s is a reconcile span of namespace ns that
// ended in a phase of the deletion flow, or of the given job.
func isDeletionSpan(s sdktrace.ReadOnlySpan, ns, job string) bool {
	if !strings.HasSuffix(s.Name(), ".Reconcile") || tracingtest.Attr(s, string(tracing.AttrNamespace)) != ns {
		return false
	}
	switch lsv1alpha1.Phase(tracingtest.Attr(s, string(tracing.AttrPhase))) {
	case lsv1alpha1.PhaseInitDelete, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting, lsv1alpha1.PhaseDeleteFailed:
		return true
	}
	return job != "" && tracingtest.Attr(s, string(tracing.AttrJobID)) == job
}

// isJobRoot reports whether s is the root span of a job of installation name
// in ns: a reconcile span without a parent that carries a job ID. (A
// reconcile outside any job is a root span too, of a trace of its own, but
// carries no job ID.)
func isJobRoot(s sdktrace.ReadOnlySpan, ns, name string) bool {
	return s.Name() == "Installation.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns &&
		tracingtest.Attr(s, string(tracing.AttrName)) == name && !s.Parent().IsValid() &&
		tracingtest.Attr(s, string(tracing.AttrJobID)) != ""
}

// jobRoot waits for the one root span of a job of the root installation
// "root" in ns other than the excluded one, and returns it.
func jobRoot(t *testing.T, rec *tracetest.SpanRecorder, ns, exclude string) sdktrace.ReadOnlySpan {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	NewWithT(t).Eventually(func(g Gomega) {
		var roots []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if isJobRoot(s, ns, "root") && tracingtest.Attr(s, string(tracing.AttrJobID)) != exclude {
				roots = append(roots, s)
			}
		}
		g.Expect(roots).To(HaveLen(1), "one reconcile started the job and is the trace's root")
		root = roots[0]
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return root
}

// expectDeletionsIn checks, once every object of want was deleted, that each
// was deleted carrying trace traceID (the installation that deleted it handed
// the job's trace over first, for the execution controller to continue), that
// every deletion reconcile of ns (and every span of job) is in that trace,
// that the trace holds a reconcile of each installation of want, and that the
// trace is one tree.
func expectDeletionsIn(t *testing.T, rec *tracetest.SpanRecorder, dw *deletionWatch, ns, job string, traceID trace.TraceID, want []string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		deleted := dw.deleted()
		for _, key := range want {
			g.Expect(deleted).To(HaveKeyWithValue(key, traceID.String()), "%s was deleted carrying the deletion's trace", key)
		}
		reconciled := map[string]bool{}
		var elsewhere []string
		for _, s := range rec.Ended() {
			if !isDeletionSpan(s, ns, job) {
				continue
			}
			key := tracingtest.Attr(s, string(tracing.AttrKind)) + "/" + tracingtest.Attr(s, string(tracing.AttrName))
			if s.SpanContext().TraceID() != traceID {
				elsewhere = append(elsewhere, fmt.Sprintf("%s %s (phase %s, job %s) in trace %s", s.Name(), key,
					tracingtest.Attr(s, string(tracing.AttrPhase)), tracingtest.Attr(s, string(tracing.AttrJobID)), s.SpanContext().TraceID()))
				continue
			}
			reconciled[key] = true
		}
		g.Expect(elsewhere).To(BeEmpty(), "deletion reconciles outside the deletion's trace")
		for _, key := range want {
			if strings.HasPrefix(key, "Installation/") {
				g.Expect(reconciled).To(HaveKey(key), "a deletion reconcile of %s", key)
			}
		}
		root, err := tracingtest.Connected(tracingtest.Trace(rec, traceID))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(root.Name()).To(Equal("Installation.Reconcile"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// Deleting a root installation is a job of its own and so a trace of its
// own: every sub-installation and execution is deleted in it
// (each is handed the deletion's trace context before it is deleted), not
// in the trace of the install job whose annotation it carried until then.
func TestDeletionIsOneTraceOfItsOwn(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()
	dw := watchDeletions(t, ns)

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	installed := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)
	installTrace := traceOf(installed)
	g.Expect(installTrace).NotTo(BeEmpty())

	g.Expect(env.Client.Delete(ctx, installed)).To(Succeed())
	waitGone(t, ns, "root")

	root := jobRoot(t, rec, ns, installed.Status.JobID)
	deletionJob := tracingtest.Attr(root, string(tracing.AttrJobID))
	g.Expect(deletionJob).NotTo(BeEmpty())
	traceID := root.SpanContext().TraceID()
	g.Expect(traceID.String()).NotTo(Equal(installTrace), "the deletion is not a continuation of the install job's trace")

	var want []string
	for _, n := range treeInstallations[1:] { // root was deleted by the test, before its job began
		want = append(want, "Installation/"+n)
	}
	for _, n := range treeExecutions {
		want = append(want, "Execution/"+n)
	}
	expectDeletionsIn(t, rec, dw, ns, deletionJob, traceID, want)
	// The root itself was deleted (by the test) still carrying the install
	// job's trace, which its deletion job did not continue.
	g.Expect(dw.deleted()).To(HaveKeyWithValue("Installation/root", installTrace), "root was deleted by the test, before its deletion job")
}

// Orphans deleted by an install job (a sub-installation and an execution the
// blueprint no longer renders, with their executions) are
// deleted in that job's trace, not in the trace of the job that created them.
func TestOrphansAreDeletedInTheJobsTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()
	dw := watchDeletions(t, ns)

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	first := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)
	firstTrace := traceOf(first)
	g.Expect(firstTrace).NotTo(BeEmpty())

	// The next job's blueprint drops sub-installation b and the root's own
	// deploy item (and with it the root's execution).
	fs := treeBlueprint("")
	fs["blueprint.yaml"] = `subinstallations:
- name: a
  blueprint:
    dir: a
  exports:
    data:
    - name: endpoint
      dataRef: a-endpoint
`
	delete(fs, "b/blueprint.yaml")
	cur := first.DeepCopy()
	cur.Spec.Blueprint.Inline.Filesystem = fs
	cur.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationReconcile)
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	var second *lsv1alpha1.Installation
	g.Eventually(func(g Gomega) {
		second = getInst(g, ns, "root")
		g.Expect(second.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(second.Status.JobIDFinished).To(Equal(second.Status.JobID))
		g.Expect(second.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", second.Status.LastError)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	root := jobRoot(t, rec, ns, first.Status.JobID)
	g.Expect(tracingtest.Attr(root, string(tracing.AttrJobID))).To(Equal(second.Status.JobID))
	traceID := root.SpanContext().TraceID()
	g.Expect(traceID.String()).To(Equal(traceOf(second)))
	g.Expect(traceID.String()).NotTo(Equal(firstTrace))

	expectDeletionsIn(t, rec, dw, ns, second.Status.JobID, traceID,
		[]string{"Installation/root-b", "Execution/root", "Execution/root-b"})
	g.Expect(dw.deleted()).To(HaveLen(3), "nothing else was deleted: %v", dw.deleted())
}

// A reconcile outside any job (after the job ended: here an annotation edit
// of the root, and an edit of the DataObject a sub-installation imports, that
// change nothing the controller acts on) is a trace of its own without a job
// ID. Continuing the finished job's trace from the annotation would make a
// long-lived installation's last trace grow for ever with resyncs, events and
// re-checks.
func TestReconcilesOutsideAJobAreTracesOfTheirOwn(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()

	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	finished := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)
	job := finished.Status.JobID
	jobTrace := jobRoot(t, rec, ns, "").SpanContext().TraceID()
	g.Expect(traceOf(finished)).To(Equal(jobTrace.String()))
	// The job's trace is complete once no span was added to it for a while
	// (the controllers' last reconciles of the job, after their final status
	// writes, may end after the root's status says Succeeded).
	g.Eventually(func(g Gomega) {
		n := len(tracingtest.Trace(rec, jobTrace))
		g.Consistently(func() int { return len(tracingtest.Trace(rec, jobTrace)) }).
			WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(n))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	complete := len(tracingtest.Trace(rec, jobTrace))

	// Idle reconciles: the root's unrelated annotation, and root-b's import.
	poked := time.Now()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"example.com/poke":"1"}}}`))
	g.Expect(env.Client.Patch(ctx, finished, patch)).To(Succeed())
	imported := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: installation.ScopedName("root", "a-endpoint")}, imported)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, imported, patch)).To(Succeed())

	g.Eventually(func(g Gomega) {
		idle := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.Name() == "Installation.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && s.StartTime().After(poked) {
				name := tracingtest.Attr(s, string(tracing.AttrName))
				idle[name] = append(idle[name], s)
			}
		}
		g.Expect(idle).To(HaveKey("root"), "the root reconciled after its annotation changed")
		g.Expect(idle).To(HaveKey("root-b"), "root-b reconciled after its import changed")
		traces := map[trace.TraceID]string{}
		for name, spans := range idle {
			for _, s := range spans {
				id := s.SpanContext().TraceID()
				g.Expect(id).NotTo(Equal(jobTrace), "%s: a reconcile outside the job is not in the job's trace", name)
				g.Expect(s.Parent().IsValid()).To(BeFalse(), "%s: the root of a trace of its own", name)
				g.Expect(tracingtest.Attr(s, string(tracing.AttrJobID))).To(BeEmpty(), "%s: no job ID", name)
				g.Expect(tracingtest.Attr(s, string(tracing.AttrPhase))).To(Equal(string(lsv1alpha1.PhaseSucceeded)), "%s", name)
				g.Expect(traces).NotTo(HaveKey(id), "%s: a trace of its own, shared with %s", name, traces[id])
				traces[id] = name
			}
		}
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// The finished job's trace got nothing: no span started after the edits,
	// none of any controller added at all.
	for _, s := range tracingtest.Trace(rec, jobTrace) {
		g.Expect(s.StartTime().After(poked)).To(BeFalse(), "%s %s started after the job ended", s.Name(), tracingtest.Attr(s, string(tracing.AttrName)))
	}
	g.Expect(tracingtest.Trace(rec, jobTrace)).To(HaveLen(complete))
	// No job started, and the job's trace context stays where it was.
	cur := getInst(g, ns, "root")
	g.Expect(cur.Status.JobID).To(Equal(job))
	g.Expect(cur.Status.JobIDFinished).To(Equal(job))
	g.Expect(cur.Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, finished.Annotations[tracing.TraceContextAnnotation]))
}
