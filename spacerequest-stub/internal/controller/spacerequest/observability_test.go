package spacerequest_test

// Tracing, metrics and events of the stub.
//
// The tracer provider is process-global (tracing.Install): the tests here
// that install an in-memory one restore "tracing off" when they end, and no
// test of this package runs in parallel with another (none calls
// t.Parallel). Spans of other tests' SpaceRequests (a late requeue) belong to
// other traces and are filtered out by trace ID.

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// consistency is how long a value must stay put.
const consistency = 2 * time.Second

// srPhases returns the phases (value 1) of the SpaceRequest's per-object gauge.
func srPhases(g Gomega, ns, name string) []string {
	return observabilitytest.ObjectPhases(g, ns, spacerequest.Kind, name)
}

// provisionedCount is the number of provisioning durations observed.
func provisionedCount(t *testing.T) uint64 {
	t.Helper()
	return observabilitytest.HistogramCount(NewWithT(t), spacerequest.ProvisioningDurationName, nil)
}

// touch adds a label to the SpaceRequest, which makes the stub reconcile it.
func touch(t *testing.T, key client.ObjectKey) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		sr := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(context.Background(), key, sr); err != nil {
			return err
		}
		base := sr.DeepCopy()
		if sr.Labels == nil {
			sr.Labels = map[string]string{}
		}
		sr.Labels["test.terrace.dev/touched"] = "true"
		return env.Client.Patch(context.Background(), sr, client.MergeFrom(base))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// TestTracingContinuesTheSpaceRequestsTrace: the stub's reconciles continue
// the trace handed over in the SpaceRequest's annotation (by the provisioner,
// played here), with a child span per step, every parent link intact. The
// provisioning duration is observed once; the per-object phase series follows
// the Ready reason and goes with the SpaceRequest; Events mark each step.
func TestTracingContinuesTheSpaceRequestsTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-trace")
	createNamespace(t, g, team)
	provisioned := nsName(team, "env")
	before := provisionedCount(t)

	// Play the provisioner: the SpaceRequest is created with its span's context.
	pctx, pspan := otel.Tracer("test/sandbox-provisioner").Start(ctx, "DeploymentTargetClaim.CreateSpaceRequest")
	sr := newSpaceRequest(team, "env")
	sr.Annotations = tracing.Inject(pctx, nil)
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	pspan.End()
	handedOver := sr.Annotations[tracing.TraceContextAnnotation]
	key := client.ObjectKeyFromObject(sr)
	traceID := pspan.SpanContext().TraceID()

	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, traceID)
		_, err := tracingtest.Connected(spans)
		g.Expect(err).NotTo(HaveOccurred())
		var steps []string
		var provisionedSeen bool
		for _, s := range spans {
			if s.Name() != "SpaceRequest.Reconcile" {
				continue
			}
			g.Expect(s.InstrumentationScope().Name).To(Equal(spacerequest.TracerName))
			g.Expect(s.Parent().SpanID()).To(Equal(pspan.SpanContext().SpanID()), "the reconcile continues the provisioner's span")
			g.Expect(s.Parent().IsRemote()).To(BeTrue())
			for _, child := range spans {
				if child.Parent().SpanID() == s.SpanContext().SpanID() {
					steps = append(steps, child.Name())
				}
			}
			if tracingtest.Attr(s, string(tracing.AttrPhase)) == toolchainv1alpha1.ReasonProvisioned {
				provisionedSeen = true
			}
		}
		g.Expect(steps).To(ContainElements("SpaceRequest.AddFinalizer", "SpaceRequest.ApplyNamespace", "SpaceRequest.ApplyServiceAccount",
			"SpaceRequest.ApplyRoleBinding", "SpaceRequest.IssueCredentials", "SpaceRequest.UpdateStatus"))
		g.Expect(provisionedSeen).To(BeTrue(), "a reconcile span ends with phase Provisioned")
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// The stub never rewrites the handed-over context.
	g.Expect(c.Get(ctx, key, sr)).To(Succeed())
	g.Expect(sr.Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, handedOver))

	// Metrics: one provisioning duration, also after more reconciles; the
	// phase gauge says Provisioned.
	g.Eventually(func() uint64 { return provisionedCount(t) }).WithTimeout(timeout).WithPolling(interval).Should(Equal(before + 1))
	g.Eventually(func(g Gomega) []string { return srPhases(g, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(Equal([]string{toolchainv1alpha1.ReasonProvisioned}))
	touch(t, key)
	g.Consistently(func() uint64 { return provisionedCount(t) }).WithTimeout(consistency).WithPolling(interval).Should(Equal(before + 1))

	// One event for the first provisioning: its intermediate steps have
	// none of their own.
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(Equal([]string{"Normal/" + spacerequest.EventProvisioned}))

	// Deletion: Terminating, the namespace goes, the SpaceRequest goes, and
	// with it its series; the deletion steps are spans of the same trace.
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: provisioned}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return srPhases(g, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(Equal([]string{toolchainv1alpha1.ReasonTerminating}))
	finalizeNamespace(t, g, provisioned)
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(func() (int, error) {
		return testutil.GatherAndCount(observabilitytest.InNamespace(team), observabilitytest.PhaseGauge)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeZero(), "the per-object series goes with the SpaceRequest")
	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, traceID)
		_, err := tracingtest.Connected(spans)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		g.Expect(names).To(ContainElements("SpaceRequest.DeleteSecret", "SpaceRequest.DeleteNamespace", "SpaceRequest.RemoveFinalizer"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElements("Normal/"+spacerequest.EventTerminating, "Normal/"+spacerequest.EventTerminated))
}

// TestProvisioningFailureIsAnEventAndAnErrorSpan: a Secret of the kubeconfig's
// name that the stub did not create blocks provisioning: a Warning
// ProvisioningFailed event, Ready=False/Provisioning, and an error on the
// reconcile span. Once it is gone the SpaceRequest turns Provisioned, and the
// provisioning duration is observed once.
func TestProvisioningFailureIsAnEventAndAnErrorSpan(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-fail")
	createNamespace(t, g, team)
	before := provisionedCount(t)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "env-kubeconfig"}}
	g.Expect(c.Create(ctx, foreign)).To(Succeed())

	pctx, pspan := otel.Tracer("test/sandbox-provisioner").Start(ctx, "DeploymentTargetClaim.CreateSpaceRequest")
	sr := newSpaceRequest(team, "env")
	sr.Annotations = tracing.Inject(pctx, nil)
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	pspan.End()
	key := client.ObjectKeyFromObject(sr)

	g.Eventually(func(g Gomega) string {
		cond := ready(g, key)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(toolchainv1alpha1.ReasonProvisioning))
		return cond.Message
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("was not created for this SpaceRequest"))
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement("Warning/" + spacerequest.EventProvisioningFailed))
	g.Eventually(func(g Gomega) {
		var failed bool
		for _, s := range tracingtest.Trace(rec, pspan.SpanContext().TraceID()) {
			if s.Name() == "SpaceRequest.Reconcile" && s.Status().Code == codes.Error {
				failed = true
			}
		}
		g.Expect(failed).To(BeTrue(), "the failed reconcile is an error span")
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(provisionedCount(t)).To(Equal(before))
	g.Eventually(func(g Gomega) []string { return srPhases(g, team, "env") }).WithTimeout(timeout).WithPolling(interval).
		Should(Equal([]string{toolchainv1alpha1.ReasonProvisioning}))

	// The blocking Secret goes; a change of the SpaceRequest brings the stub back at once.
	g.Expect(c.Delete(ctx, foreign)).To(Succeed())
	touch(t, key)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Eventually(func() uint64 { return provisionedCount(t) }).WithTimeout(timeout).WithPolling(interval).Should(Equal(before + 1))

	// Clean up: the SpaceRequest and its namespace go.
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: nsName(team, "env")}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	finalizeNamespace(t, g, nsName(team, "env"))
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &toolchainv1alpha1.SpaceRequest{})) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// TestTracingOffWritesNoAnnotation: with tracing off, no version of a
// SpaceRequest ever carries the trace-context annotation, from creation
// through provisioning to its deletion.
func TestTracingOffWritesNoAnnotation(t *testing.T) {
	tracing.Install(nil)
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Client
	team := unique("team-notrace")
	createNamespace(t, g, team)

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	aw := tracingtest.WatchAnnotations(t, wc, team, &toolchainv1alpha1.SpaceRequestList{})

	sr := newSpaceRequest(team, "env")
	g.Expect(c.Create(ctx, sr)).To(Succeed())
	key := client.ObjectKeyFromObject(sr)
	g.Eventually(reason(key)).WithTimeout(timeout).WithPolling(interval).Should(Equal(toolchainv1alpha1.ReasonProvisioned))
	g.Expect(c.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: nsName(team, "env")}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	finalizeNamespace(t, g, nsName(team, "env"))

	g.Eventually(aw.Deleted).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(sr.Name), "the watch saw the SpaceRequest go")
	g.Expect(aw.Seen()).To(BeNumerically(">=", 4), "the watch saw the SpaceRequest's versions")
	g.Expect(aw.Annotated()).To(BeEmpty(), "no SpaceRequest may carry %s with tracing off", tracing.TraceContextAnnotation)
}
