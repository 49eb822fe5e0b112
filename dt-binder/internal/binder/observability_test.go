package binder_test

// Tracing, metrics and events of the binder.
//
// The tracer provider is process-global (tracing.Install): the tests here
// that install an in-memory one restore "tracing off" when they end, and no
// test of this package runs in parallel with another (none calls t.Parallel;
// each test's binder is stopped when the test ends), so they cannot see or
// change another test's spans.

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
)

// childNames lists the names of spans whose parent is parent.
func childNames(spans []sdktrace.ReadOnlySpan, parent trace.SpanID) []string {
	var names []string
	for _, s := range spans {
		if s.Parent().SpanID() == parent {
			names = append(names, s.Name())
		}
	}
	return names
}

// bindCount is the number of bind latencies observed for mode.
func bindCount(t *testing.T, mode string) uint64 {
	t.Helper()
	return observabilitytest.HistogramCount(NewWithT(t), observability.BindDurationName, map[string]string{"mode": mode})
}

// TestTracingDynamicProvisioning: the binder's first write on a claim (the
// finalizer and the dt-provisioner mark) carries the trace context of its
// reconcile span, which is the root of the claim's trace. Playing the
// provisioner, a target is created continuing that trace; the binder's
// target and claim reconciles continue it again, so one trace covers the
// whole provisioning with every parent link intact. The bind latency is
// observed once (mode dynamic), the per-object phase series follow the
// objects and go with them, and Events mark each step.
func TestTracingDynamicProvisioning(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)
	dynamicBefore := bindCount(t, observability.ModeDynamic)

	create(t, newClaim(ns, "c", class.Name, ""))
	c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))
	g.Expect(c.Annotations).To(HaveKey(tracing.TraceContextAnnotation))
	handedOver := c.Annotations[tracing.TraceContextAnnotation]
	root := tracingtest.HandedOver(c.Annotations)
	g.Expect(root.IsValid()).To(BeTrue(), "annotation %q", handedOver)

	// The annotation names the binder's first reconcile of the claim: the
	// root of the trace.
	g.Eventually(func(g Gomega) {
		s, err := tracingtest.Connected(tracingtest.Trace(rec, root.TraceID()))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.SpanContext().SpanID()).To(Equal(root.SpanID()))
		g.Expect(s.Name()).To(Equal("DeploymentTargetClaim.Reconcile"))
		g.Expect(s.Parent().IsValid()).To(BeFalse(), "the binder starts the claim's trace")
		g.Expect(s.InstrumentationScope().Name).To(Equal(observability.TracerName))
		g.Expect(tracingtest.Attr(s, "terrace.name")).To(Equal("c"))
		g.Expect(tracingtest.Attr(s, "k8s.namespace.name")).To(Equal(ns))
		g.Expect(tracingtest.Attr(s, "terrace.kind")).To(Equal("DeploymentTargetClaim"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Play the provisioner: it continues the claim's trace and creates the
	// target with the trace context in the same create.
	pctx, pspan := otel.Tracer("test/sandbox-provisioner").Start(tracing.Extract(ctx, c.Annotations), "DeploymentTargetClaim.CreateDeploymentTarget")
	dt := newTarget(ns, "provisioned", class.Name, "c", "test.terrace.dev/keep")
	dt.Annotations = tracing.Inject(pctx, map[string]string{appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner})
	create(t, dt)
	pspan.End()
	targetTrace := dt.Annotations[tracing.TraceContextAnnotation]
	g.Expect(tracingtest.HandedOver(dt.Annotations).SpanID()).To(Equal(pspan.SpanContext().SpanID()))

	eventuallyTarget(t, ns, "provisioned", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")
	c = eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(c.Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, handedOver), "the claim's trace context is written once")
	g.Expect(getTarget(g, ns, "provisioned").Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, targetTrace),
		"the binder does not rewrite a provisioned target's trace context")

	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, root.TraceID())
		_, err := tracingtest.Connected(spans)
		g.Expect(err).NotTo(HaveOccurred())
		var targetBound, claimBound bool
		for _, s := range spans {
			switch {
			case s.Name() == "DeploymentTarget.Reconcile" && tracingtest.Attr(s, "terrace.phase") == "Bound":
				// The target's reconcile continues the provisioner's span.
				g.Expect(s.Parent().SpanID()).To(Equal(pspan.SpanContext().SpanID()))
				g.Expect(s.Parent().IsRemote()).To(BeTrue())
				targetBound = true
			case s.Name() == "DeploymentTargetClaim.Reconcile" && tracingtest.Attr(s, "terrace.phase") == "Bound":
				claimBound = claimBound || slices.Contains(childNames(spans, s.SpanContext().SpanID()), "DeploymentTargetClaim.PatchStatus")
				if s.SpanContext().SpanID() != root.SpanID() {
					// Later reconciles continue the claim's trace from its annotation.
					g.Expect(s.Parent().SpanID()).To(Equal(root.SpanID()))
				}
			}
		}
		g.Expect(targetBound).To(BeTrue(), "a target reconcile that ended Bound")
		g.Expect(claimBound).To(BeTrue(), "a claim reconcile that wrote Bound")
		// The root reconcile wrote the finalizer, the dt-provisioner mark and
		// the annotation in one metadata write.
		g.Expect(childNames(spans, root.SpanID())).To(ContainElement("DeploymentTargetClaim.PatchMetadata"))
		g.Expect(childNames(spans, root.SpanID())).NotTo(ContainElement("DeploymentTargetClaim.AddFinalizer"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Metrics: bound once (dynamic), and the per-object phase gauges.
	g.Eventually(func() uint64 { return bindCount(t, observability.ModeDynamic) }).
		WithTimeout(timeout).WithPolling(poll).Should(Equal(dynamicBefore + 1))
	g.Eventually(func(g Gomega) {
		g.Expect(observabilitytest.ObjectPhases(g, ns, observability.KindClaim, "c")).To(Equal([]string{"Bound"}))
		g.Expect(observabilitytest.ObjectPhases(g, ns, observability.KindTarget, "provisioned")).To(Equal([]string{"Bound"}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Events, with filterable reasons.
	g.Eventually(func(g Gomega) {
		// Outcomes only: no informational event for the provisioning mark.
		g.Expect(observabilitytest.Events(g, env.Client, ns, "c")).To(ConsistOf("Normal/" + appstudiov1alpha1.BindReasonBound))
		g.Expect(observabilitytest.Events(g, env.Client, ns, "provisioned")).To(ContainElement("Normal/" + appstudiov1alpha1.TargetReasonBound))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// More reconciles of the bound claim (a label change) observe nothing again.
	patchLabel(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	g.Consistently(func() uint64 { return bindCount(t, observability.ModeDynamic) }).
		WithTimeout(consistency).WithPolling(poll).Should(Equal(dynamicBefore + 1))

	// Deletion (reclaimPolicy Delete): the target is deleted; once it goes,
	// so does the claim, and with them their per-object series.
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "c"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getTarget(g, ns, "provisioned").DeletionTimestamp).NotTo(BeNil())
		// No SpaceRequest backs this target: its Terminating condition says so.
		g.Expect(observabilitytest.Events(g, env.Client, ns, "provisioned")).To(ContainElement("Normal/" + appstudiov1alpha1.TerminatingReasonSpaceRequestGone))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	removeFinalizer(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provisioned"}}, "test.terrace.dev/keep")
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	g.Eventually(func() (int, error) {
		return testutil.GatherAndCount(observabilitytest.InNamespace(ns), observabilitytest.PhaseGauge)
	}).WithTimeout(timeout).WithPolling(poll).Should(BeZero(), "per-object series of deleted objects are deleted")
}

// patchLabel adds a label to obj, which makes its controllers reconcile it.
func patchLabel(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		base := obj.DeepCopyObject().(client.Object)
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["test.terrace.dev/touched"] = "true"
		obj.SetLabels(labels)
		return env.Client.Patch(context.Background(), obj, client.MergeFrom(base))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestTracingStaticBinding: a static binding hands the claim's trace over to
// the target in the claimRef write itself, so the target's reconcile (which
// reports it Bound) is part of the claim's trace. The bind latency is
// observed once with mode static.
func TestTracingStaticBinding(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	startBinder(t, binder.Options{}, ns)
	staticBefore := bindCount(t, observability.ModeStatic)

	create(t, newTarget(ns, "wanted", class.Name, ""))
	eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "c", class.Name, "wanted"))
	c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	dt := eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")

	root := tracingtest.HandedOver(c.Annotations)
	g.Expect(root.IsValid()).To(BeTrue())
	claimed := tracingtest.HandedOver(dt.Annotations)
	g.Expect(claimed.TraceID()).To(Equal(root.TraceID()), "the target carries the claim's trace")

	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, root.TraceID())
		_, err := tracingtest.Connected(spans)
		g.Expect(err).NotTo(HaveOccurred())
		var ct sdktrace.ReadOnlySpan
		g.Expect(spans).To(ContainElement(HaveField("SpanContext().SpanID()", claimed.SpanID()), &ct))
		g.Expect(ct.Name()).To(Equal("DeploymentTargetClaim.ClaimTarget"))
		g.Expect(tracingtest.Attr(ct, "terrace.target")).To(Equal("wanted"))
		var targetBound bool
		for _, s := range spans {
			if s.Name() == "DeploymentTarget.Reconcile" && tracingtest.Attr(s, "terrace.phase") == "Bound" {
				g.Expect(s.Parent().SpanID()).To(Equal(claimed.SpanID()))
				targetBound = true
			}
		}
		g.Expect(targetBound).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Eventually(func() uint64 { return bindCount(t, observability.ModeStatic) }).
		WithTimeout(timeout).WithPolling(poll).Should(Equal(staticBefore + 1))
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "c") }).WithTimeout(timeout).WithPolling(poll).
		Should(Equal([]string{"Normal/" + appstudiov1alpha1.BindReasonBound}), "the binding is one Event on the claim (TestOneEventPerBinding)")

	// Retain: the claim goes, the target is Released and stays; the claim's
	// series goes, the target's follows it to Released.
	g.Expect(env.Client.Delete(context.Background(), c)).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
	g.Eventually(func(g Gomega) {
		g.Expect(observabilitytest.ObjectPhases(g, ns, observability.KindClaim, "c")).To(BeEmpty())
		g.Expect(observabilitytest.ObjectPhases(g, ns, observability.KindTarget, "wanted")).To(Equal([]string{"Released"}))
		g.Expect(observabilitytest.Events(g, env.Client, ns, "wanted")).To(ContainElement("Normal/" + appstudiov1alpha1.TargetReasonReleased))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestRefusalEvents: a binding the binder refuses is a Warning event with the
// condition's reason, emitted once per transition.
func TestRefusalEvents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	other := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "foreign", other.Name, ""), newClaim(ns, "wants-foreign", class.Name, "foreign"))
	eventuallyClaim(t, ns, "wants-foreign", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonClassMismatch)
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "wants-foreign") }).WithTimeout(timeout).WithPolling(poll).
		Should(ContainElement("Warning/" + appstudiov1alpha1.BindReasonClassMismatch))
	// More reconciles (a label change) emit no second event.
	patchLabel(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wants-foreign"}})
	g.Consistently(func(g Gomega) {
		var n int
		for _, e := range observabilitytest.Events(g, env.Client, ns, "wants-foreign") {
			if e == "Warning/"+appstudiov1alpha1.BindReasonClassMismatch {
				n++
			}
		}
		g.Expect(n).To(Equal(1))
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) []string {
		return observabilitytest.ObjectPhases(g, ns, observability.KindClaim, "wants-foreign")
	}).WithTimeout(timeout).WithPolling(poll).Should(Equal([]string{"Pending"}))
}

// TestTracingOffWritesNoAnnotation: with tracing off, no version of any
// claim or target the binder writes ever carries the trace-context
// annotation, through dynamic provisioning, static binding and deletion.
func TestTracingOffWritesNoAnnotation(t *testing.T) {
	tracing.Install(nil)
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	aw := tracingtest.WatchAnnotations(t, watchClient(t), ns, &appstudiov1alpha1.DeploymentTargetClaimList{}, &appstudiov1alpha1.DeploymentTargetList{})
	startBinder(t, binder.Options{}, ns)

	// Dynamic provisioning (playing the provisioner) and static binding.
	create(t, newClaim(ns, "dynamic", class.Name, ""))
	eventuallyClaim(t, ns, "dynamic", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	dt := newTarget(ns, "provisioned", class.Name, "dynamic")
	dt.Annotations = map[string]string{appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner}
	create(t, dt, newTarget(ns, "static", class.Name, ""), newClaim(ns, "static", class.Name, "static"))
	eventuallyClaim(t, ns, "dynamic", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	eventuallyClaim(t, ns, "static", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)

	// Deletion.
	for _, name := range []string{"dynamic", "static"} {
		g.Expect(env.Client.Delete(ctx, getClaim(g, ns, name))).To(Succeed())
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	var claims appstudiov1alpha1.DeploymentTargetClaimList
	g.Expect(env.Client.List(ctx, &claims, client.InNamespace(ns))).To(Succeed())
	g.Expect(claims.Items).To(BeEmpty())

	// The watches saw everything up to the claims' deletion (the last writes).
	g.Eventually(aw.Deleted).WithTimeout(timeout).WithPolling(poll).
		Should(ContainElements("dynamic", "static"))
	g.Expect(aw.Seen()).To(BeNumerically(">=", 10), "the watches saw the objects' versions")
	g.Expect(aw.Annotated()).To(BeEmpty(), "no object may carry %s with tracing off", tracing.TraceContextAnnotation)
}

// watchClient is a client of env that can watch.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return wc
}
