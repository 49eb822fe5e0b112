package controller_test

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

// Tracing is process-global (tracing.Install): the tests of this package
// run one at a time, each with its own manager, and tracing is switched on
// before a test's manager starts and off after it stopped.

// A root execution's job is a trace of its own: the reconcile that started
// it is the root, the execution keeps it in its annotation, the items are
// handed it with the job, and the deployer's spans join it.
func TestRootExecutionJobIsOneTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "traced", mockItem("a", mockv1alpha1.ProviderConfiguration{}), mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	job := done.Status.JobID

	var root sdktrace.ReadOnlySpan
	g.Eventually(func(g Gomega) {
		root = nil
		spans := rec.Ended()
		for _, s := range spans {
			if s.Name() == "Execution.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrJobID)) == job && !s.Parent().IsValid() {
				g.Expect(root).To(BeNil(), "one root")
				root = s
			}
		}
		g.Expect(root).NotTo(BeNil())
		traceID := root.SpanContext().TraceID()
		kinds := map[string]bool{}
		for _, s := range spans {
			if tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrJobID)) == job {
				g.Expect(s.SpanContext().TraceID()).To(Equal(traceID), "%s %s", s.Name(), tracingtest.Attr(s, string(tracing.AttrName)))
				kinds[tracingtest.Attr(s, string(tracing.AttrKind))+"/"+tracingtest.Attr(s, string(tracing.AttrName))] = true
			}
		}
		g.Expect(kinds).To(HaveKey("Execution/traced"))
		g.Expect(kinds).To(HaveKey("DeployItem/traced-a"))
		g.Expect(kinds).To(HaveKey("DeployItem/traced-b"))
		_, err := tracingtest.Connected(tracingtest.Trace(rec, traceID))
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	want := root.SpanContext().TraceID().String()
	g.Expect(done.Annotations[tracing.TraceContextAnnotation]).To(ContainSubstring(want + "-" + root.SpanContext().SpanID().String()))
	for _, item := range []string{"a", "b"} {
		g.Expect(getItem(g, ns, "traced", item).Annotations[tracing.TraceContextAnnotation]).To(ContainSubstring(want), item)
	}
}

// An execution handed a job (by its installation) continues the trace
// handed with it, keeps the annotation as handed, and hands it on.
func TestHandedOverTraceIsContinued(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "owned", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	exec.Annotations = nil
	exec.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: "root"}
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())

	// What the installation controller does: the trace context, then the job.
	hctx, handing := otel.Tracer("test").Start(ctx, "Installation.ObjectsCreated")
	annotation := tracing.Inject(hctx, nil)[tracing.TraceContextAnnotation]
	handing.End()
	cur := getExec(g, exec)
	p := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{tracing.TraceContextAnnotation: annotation}
	g.Expect(env.Client.Patch(ctx, cur, p)).To(Succeed())
	cur.Status.JobID = "job-from-installation"
	g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(done.Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, annotation))

	traceID := handing.SpanContext().TraceID()
	g.Eventually(func(g Gomega) {
		spans := rec.Ended()
		n := 0
		for _, s := range spans {
			if tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrJobID)) == "job-from-installation" {
				g.Expect(s.SpanContext().TraceID()).To(Equal(traceID), "%s %s", s.Name(), tracingtest.Attr(s, string(tracing.AttrName)))
				if s.Name() == "Execution.Reconcile" {
					g.Expect(s.Parent().SpanID()).To(Equal(handing.SpanContext().SpanID()))
				}
				n++
			}
		}
		g.Expect(n).To(BeNumerically(">=", 3))
		_, err := tracingtest.Connected(tracingtest.Trace(rec, traceID))
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(getItem(g, ns, "owned", "a").Annotations[tracing.TraceContextAnnotation]).To(ContainSubstring(traceID.String()))
}

// jobRootSpan waits for the one root span of a job of the root execution
// named name in ns that is none of the excluded jobs, and returns it. The
// roots of reconciles outside any job (no job ID) are no job's.
func jobRootSpan(t *testing.T, rec *tracetest.SpanRecorder, ns, name string, exclude ...string) sdktrace.ReadOnlySpan {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	NewWithT(t).Eventually(func(g Gomega) {
		var roots []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "Execution.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrName)) == name &&
				!s.Parent().IsValid() && tracingtest.Attr(s, string(tracing.AttrJobID)) != "" &&
				!slices.Contains(exclude, tracingtest.Attr(s, string(tracing.AttrJobID))) {
				roots = append(roots, s)
			}
		}
		g.Expect(roots).To(HaveLen(1))
		root = roots[0]
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	return root
}

// A reconcile outside any job (here: the execution and its item touched
// after the job ended, which starts no job) is a trace of its own, without a
// job ID: the finished job's trace gets no span from it.
func TestIdleReconcileIsATraceOfItsOwn(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "idle", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	jobTrace := jobRootSpan(t, rec, ns, "idle").SpanContext().TraceID()

	// Every reconcile starting from now on is outside the job.
	touched := time.Now()
	cur := getExec(g, exec)
	p := client.MergeFrom(cur.DeepCopy())
	cur.Annotations["test.terrace.dev/touched"] = "yes"
	g.Expect(env.Client.Patch(ctx, cur, p)).To(Succeed())
	di := getItem(g, ns, "idle", "a")
	p = client.MergeFrom(di.DeepCopy())
	di.Labels["test.terrace.dev/touched"] = "yes"
	g.Expect(env.Client.Patch(ctx, di, p)).To(Succeed())

	idleSpans := func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "Execution.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns &&
				tracingtest.Attr(s, string(tracing.AttrName)) == "idle" && s.StartTime().After(touched) {
				out = append(out, s)
			}
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		ss := idleSpans()
		g.Expect(ss).NotTo(BeEmpty(), "the touches bring reconciles")
		for _, s := range ss {
			g.Expect(s.Parent().IsValid()).To(BeFalse(), "an idle reconcile is the root of its own trace")
			g.Expect(s.SpanContext().TraceID()).NotTo(Equal(jobTrace))
			g.Expect(tracingtest.Attr(s, string(tracing.AttrJobID))).To(BeEmpty(), "an idle reconcile has no job ID")
		}
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	for _, s := range tracingtest.Trace(rec, jobTrace) {
		g.Expect(s.StartTime()).To(BeTemporally("<", touched), "span %s %s added to the finished job's trace",
			s.Name(), tracingtest.Attr(s, string(tracing.AttrName)))
	}
	// The execution keeps the job's trace context: nothing was written.
	g.Expect(getExec(g, exec).Annotations[tracing.TraceContextAnnotation]).To(Equal(done.Annotations[tracing.TraceContextAnnotation]))
}

// expectItemDeletedIn checks that the deploy item (item of execution exec)
// was deleted carrying trace traceID, and that the deployer's reconciles of
// its deletion (and its Delete step) are all in that trace.
func expectItemDeletedIn(t *testing.T, rec *tracetest.SpanRecorder, items *recorder, ns, exec, item string, traceID trace.TraceID) {
	t.Helper()
	g := NewWithT(t)
	items.waitRecorded(t, gone(item))
	i := items.first(deletionStarted(item))
	g.Expect(i).To(BeNumerically(">=", 0))
	items.mu.Lock()
	deleted := items.events[i].item
	items.mu.Unlock()
	g.Expect(tracingtest.HandedOver(deleted.Annotations).TraceID().String()).To(Equal(traceID.String()), "item %s was deleted carrying the deleting job's trace", item)

	name := execution.ItemObjectName(exec, item)
	g.Eventually(func(g Gomega) {
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			byID[s.SpanContext().SpanID()] = s
		}
		reconciles, deletes := 0, 0
		for _, s := range rec.Ended() {
			switch {
			case s.Name() == "DeployItem.Reconcile" && tracingtest.Attr(s, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(s, string(tracing.AttrName)) == name &&
				tracingtest.Attr(s, string(tracing.AttrPhase)) == string(lsv1alpha1.PhaseDeleting):
				g.Expect(s.SpanContext().TraceID()).To(Equal(traceID), "a deletion reconcile of %s", item)
				reconciles++
			case s.Name() == "DeployItem.Delete":
				if p, ok := byID[s.Parent().SpanID()]; ok && tracingtest.Attr(p, string(tracing.AttrNamespace)) == ns && tracingtest.Attr(p, string(tracing.AttrName)) == name {
					g.Expect(s.SpanContext().TraceID()).To(Equal(traceID), "the deployer's Delete of %s", item)
					deletes++
				}
			}
		}
		g.Expect(reconciles).To(BeNumerically(">=", 1))
		g.Expect(deletes).To(BeNumerically(">=", 1))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// The execution controller hands the trace of the job that deletes a deploy
// item to the item before deleting it - the orphan cleanup of an install job,
// or a deletion job - so the deployer deletes it in that trace, not in the
// trace of the job that last handed the item a job.
func TestItemsAreDeletedInTheDeletingJobsTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	ns := newNamespace(t)
	items := record(t, ns)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "deleting", mockItem("a", mockv1alpha1.ProviderConfiguration{}), mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	firstTrace := jobRootSpan(t, rec, ns, "deleting").SpanContext().TraceID()

	// The next job drops b: its orphan cleanup deletes b in its trace.
	cur := first.DeepCopy()
	cur.Spec.DeployItems = cur.Spec.DeployItems[:1]
	cur.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationReconcile)
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	var second *lsv1alpha1.Execution
	g.Eventually(func(g Gomega) {
		second = getExec(g, exec)
		g.Expect(second.Status.JobID).NotTo(Equal(first.Status.JobID))
		g.Expect(second.Status.JobIDFinished).To(Equal(second.Status.JobID))
		g.Expect(second.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	secondTrace := jobRootSpan(t, rec, ns, "deleting", first.Status.JobID).SpanContext().TraceID()
	g.Expect(secondTrace).NotTo(Equal(firstTrace))
	expectItemDeletedIn(t, rec, items, ns, "deleting", "b", secondTrace)

	// The execution's deletion job is a trace of its own, and a is deleted in it.
	g.Expect(env.Client.Delete(ctx, second)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
	deletion := jobRootSpan(t, rec, ns, "deleting", first.Status.JobID, second.Status.JobID).SpanContext().TraceID()
	g.Expect(deletion).NotTo(Equal(secondTrace))
	expectItemDeletedIn(t, rec, items, ns, "deleting", "a", deletion)
	_, err := tracingtest.Connected(tracingtest.Trace(rec, deletion))
	g.Expect(err).NotTo(HaveOccurred())
}

// With tracing off neither executions nor their items ever carry the
// trace-context annotation, through a job and the deletion.
func TestNoTraceAnnotationWhileTracingOff(t *testing.T) {
	tracing.Install(nil)
	ns := newNamespace(t)
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	aw := tracingtest.WatchAnnotations(t, wc, ns, &lsv1alpha1.ExecutionList{}, &lsv1alpha1.DeployItemList{})
	startManager(t, ns, testOptions())
	exec := newExecution(ns, "untraced", mockItem("a", mockv1alpha1.ProviderConfiguration{}), mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(aw.Deleted).WithTimeout(eventually).WithPolling(poll).Should(ContainElement("untraced"))
	g.Expect(aw.Annotated()).To(BeEmpty())
}

// executionMetrics reads the execution's job counters and duration samples.
func executionMetrics(g Gomega) map[string]float64 {
	out := map[string]float64{}
	for _, name := range []string{"terrace_jobs_started_total", "terrace_jobs_finished_total", "terrace_job_duration_seconds"} {
		for _, m := range observabilitytest.Family(g, name).GetMetric() {
			l := observabilitytest.Labels(m)
			if l["kind"] != execution.Kind {
				continue
			}
			key := name + " " + l["result"]
			if h := m.GetHistogram(); h != nil {
				out[key] += float64(h.GetSampleCount())
			} else {
				out[key] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// Metrics of a job and a deletion job of a root execution: jobs started and
// finished (Succeeded, Deleted) with their durations, the phase series of
// the execution and its items while they exist, and none once they are gone.
func TestExecutionMetrics(t *testing.T) {
	tracing.Install(nil)
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	before := executionMetrics(g)
	exec := newExecution(ns, "measured", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	want := map[string]float64{}
	for k, v := range before {
		want[k] = v
	}
	want["terrace_jobs_started_total "]++
	want["terrace_jobs_finished_total Succeeded"]++
	want["terrace_job_duration_seconds Succeeded"]++
	g.Eventually(executionMetrics).WithTimeout(eventually).WithPolling(poll).Should(Equal(want))
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(eventually).WithPolling(poll).
		Should(ConsistOf("Execution measured Succeeded", "DeployItem measured-a Succeeded"))
	// The execution's own duration metric is folded into the shared one.
	g.Expect(observabilitytest.Family(g, "terrace_execution_job_duration_seconds")).To(BeNil())

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
	want["terrace_jobs_started_total "]++
	want["terrace_jobs_finished_total Deleted"]++
	want["terrace_job_duration_seconds Deleted"]++
	g.Eventually(executionMetrics).WithTimeout(eventually).WithPolling(poll).Should(Equal(want))
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(eventually).WithPolling(poll).Should(BeEmpty())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "measured") }).WithTimeout(eventually).WithPolling(poll).
		Should(ContainElements("Normal/Succeeded", "Normal/Deleted"))
	// Events are for outcomes and problems: no per-job or per-item ones.
	g.Expect(observabilitytest.Events(g, env.Client, ns, "measured")).NotTo(ContainElements("Normal/JobStarted", "Normal/DeployItemCreated", "Normal/DeployItemStarted"))
}

// A failed item fails the execution: its events name the cause
// (DeployItemsFailed) and the transition (Failed), once each.
func TestExecutionEventsOnFailure(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "failing", mockItem("a", mockv1alpha1.ProviderConfiguration{Phase: string(lsv1alpha1.PhaseFailed)}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "failing") }).WithTimeout(eventually).WithPolling(poll).
		Should(ContainElements("Warning/DeployItemsFailed", "Warning/Failed"))
	evs := observabilitytest.Events(g, env.Client, ns, "failing")
	g.Expect(evs).NotTo(ContainElements("Normal/JobStarted", "Normal/DeployItemCreated", "Normal/DeployItemStarted"))
	for _, e := range []string{"Warning/DeployItemsFailed", "Warning/Failed"} {
		n := 0
		for _, got := range evs {
			if got == e {
				n++
			}
		}
		g.Expect(n).To(Equal(1), e)
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "failing-a") }).WithTimeout(eventually).WithPolling(poll).
		Should(ContainElements("Warning/MockFailed", "Warning/Failed"))
}
