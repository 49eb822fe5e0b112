package controller_test

// Tracing and events of the provisioner.
//
// The tracer provider is process-global (tracing.Install): the tests here
// that install an in-memory one restore "tracing off" when they end, and no
// test of this package runs in parallel with another (none calls t.Parallel;
// each test's managers stop when the test ends).

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/tracing/tracingtest"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/claim"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// TestTracingHandOver: the provisioner continues the trace the binder handed
// over in the claim's annotation, creates the SpaceRequest and the target
// with the trace context in the create itself, and its target reconciler
// continues the target's trace: one trace from the binder's span on, with
// every parent link intact.
func TestTracingHandOver(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("trace")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)

	// Play the binder: its reconcile span marks the claim and hands the trace over.
	bctx, bspan := otel.Tracer("test/dt-binder").Start(ctx, "DeploymentTargetClaim.Reconcile")
	c := &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c", Annotations: tracing.Inject(bctx, map[string]string{
			appstudiov1alpha1.ProvisionerAnnotation: appstudiov1alpha1.SandboxProvisioner,
		})},
		Spec: appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: n},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	bspan.End()
	traceID := bspan.SpanContext().TraceID()

	// The SpaceRequest carries the trace on, from the provisioner's
	// CreateSpaceRequest span, a child of its reconcile of the claim, a child
	// of the binder's span.
	sr := waitForOneSpaceRequest(t, c)
	srTrace := tracingtest.HandedOver(sr.Annotations)
	g.Expect(srTrace.IsValid()).To(BeTrue(), "SpaceRequest annotations %v", sr.Annotations)
	g.Expect(srTrace.TraceID()).To(Equal(traceID))
	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, traceID)
		var create, reconcile sdktrace.ReadOnlySpan
		g.Expect(spans).To(ContainElement(HaveField("SpanContext().SpanID()", srTrace.SpanID()), &create))
		g.Expect(create.Name()).To(Equal("DeploymentTargetClaim.CreateSpaceRequest"))
		g.Expect(create.InstrumentationScope().Name).To(Equal(sandbox.TracerName))
		g.Expect(spans).To(ContainElement(HaveField("SpanContext().SpanID()", create.Parent().SpanID()), &reconcile))
		g.Expect(reconcile.Name()).To(Equal("DeploymentTargetClaim.Reconcile"))
		g.Expect(reconcile.Parent().SpanID()).To(Equal(bspan.SpanContext().SpanID()))
		g.Expect(reconcile.Parent().IsRemote()).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// Play the SpaceRequest controller, continuing the SpaceRequest's trace.
	_, sspan := otel.Tracer("test/spacerequest-stub").Start(tracing.Extract(ctx, sr.Annotations), "SpaceRequest.Reconcile")
	playStub(t, sr)
	sspan.End()

	dt := waitForTarget(t, c)
	dtTrace := tracingtest.HandedOver(dt.Annotations)
	g.Expect(dtTrace.TraceID()).To(Equal(traceID), "target annotations %v", dt.Annotations)
	g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))

	g.Eventually(func(g Gomega) {
		spans := tracingtest.Trace(rec, traceID)
		_, err := tracingtest.Connected(spans)
		g.Expect(err).NotTo(HaveOccurred())
		var create sdktrace.ReadOnlySpan
		g.Expect(spans).To(ContainElement(HaveField("SpanContext().SpanID()", dtTrace.SpanID()), &create))
		g.Expect(create.Name()).To(Equal("DeploymentTargetClaim.CreateDeploymentTarget"))
		// The provisioner's target reconciler continues the target's trace.
		var targetReconciled bool
		for _, s := range spans {
			if s.Name() == "DeploymentTarget.Reconcile" && s.Parent().SpanID() == dtTrace.SpanID() {
				targetReconciled = true
			}
		}
		g.Expect(targetReconciled).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// The SpaceRequest's trace context is written once, at its creation.
	cur := &toolchainv1alpha1.SpaceRequest{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur)).To(Succeed())
	g.Expect(cur.Annotations).To(HaveKeyWithValue(tracing.TraceContextAnnotation, sr.Annotations[tracing.TraceContextAnnotation]))

	// Events are for problems only: creating the SpaceRequest and the target
	// is in the trace and the log, not an Event.
	g.Expect(observabilitytest.Events(g, env.Client, n, "c")).NotTo(ContainElement(HavePrefix("Normal/")))
}

// TestProvisioningFailureEvents: a SpaceRequest the API server refuses (the
// class's targetClusterRoles repeat a role: a set in the schema) is a
// Warning ProvisioningFailed event on the claim, recorded on the reconcile
// span; a Ready SpaceRequest without its Secret is CredentialsSecretMissing
// (once per failure, not also ProvisioningFailed).
func TestProvisioningFailureEvents(t *testing.T) {
	rec := tracingtest.Record(t)
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("fail")
	createClass(t, n+"-bad", appstudiov1alpha1.ReclaimPolicyDelete, `{"targetClusterRoles":["view","view"]}`)
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)

	bad := createClaim(t, n, "bad", n+"-bad", appstudiov1alpha1.SandboxProvisioner)
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, n, bad.Name) }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement("Warning/" + claim.EventProvisioningFailed))
	g.Expect(spaceRequestsOf(g, bad)).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		var failed bool
		for _, s := range rec.Ended() {
			if s.Name() == "DeploymentTargetClaim.CreateSpaceRequest" && s.Status().Code.String() == "Error" {
				failed = true
			}
		}
		g.Expect(failed).To(BeTrue(), "the failed create is an error span")
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	noSecret := createClaim(t, n, "no-secret", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, noSecret)
	g.Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur); err != nil {
			return err
		}
		cur.Status.TargetClusterURL = apiURL
		cur.Status.NamespaceAccess = []toolchainv1alpha1.NamespaceAccess{{Name: n + "-ns", SecretRef: "missing"}}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: toolchainv1alpha1.ReasonProvisioned, ObservedGeneration: cur.Generation,
		})
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, n, noSecret.Name) }).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement("Warning/" + claim.EventCredentialsSecretAbsent))
	g.Expect(observabilitytest.Events(g, env.Client, n, noSecret.Name)).NotTo(ContainElement("Warning/" + claim.EventProvisioningFailed))
}

// TestTracingOffWritesNoAnnotation: with tracing off, no version of any
// claim, SpaceRequest or target ever carries the trace-context annotation,
// through provisioning and deprovisioning.
func TestTracingOffWritesNoAnnotation(t *testing.T) {
	tracing.Install(nil)
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("notrace")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	aw := tracingtest.WatchAnnotations(t, wc, n,
		&appstudiov1alpha1.DeploymentTargetClaimList{}, &appstudiov1alpha1.DeploymentTargetList{}, &toolchainv1alpha1.SpaceRequestList{})
	startManager(t, 2)

	c := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, c)
	playStub(t, sr)
	dt := waitForTarget(t, c)
	// Play the binder: bound; then the target is deleted, which deletes the
	// SpaceRequest; the SpaceRequest controller lets it go.
	bindAndDeleteTarget(t, c, dt, sr)
	releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())

	g.Eventually(aw.Deleted).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElements("c", sr.Name, dt.Name))
	g.Expect(aw.Seen()).To(BeNumerically(">=", 6))
	g.Expect(aw.Annotated()).To(BeEmpty(), "no object may carry %s with tracing off", tracing.TraceContextAnnotation)
}
