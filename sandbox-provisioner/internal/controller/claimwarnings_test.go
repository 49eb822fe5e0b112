package controller_test

// The Warnings a claim gets while it waits: about its class, and about a
// SpaceRequest that does not become Ready. Each once per distinct message,
// not once per reconcile.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	kittimeout "github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/claim"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// claimNotes lists the notes of the Events of reason about the claim.
func claimNotes(g Gomega, c *appstudiov1alpha1.DeploymentTargetClaim, reason string) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(c.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "DeploymentTargetClaim" && e.Regarding.Name == c.Name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// claimCount counts the Events of reason about the claim, repeats in a
// series included (occurrences).
func claimCount(c *appstudiov1alpha1.DeploymentTargetClaim, reason string) func(g Gomega) int {
	return func(g Gomega) int { return occurrencesOf(g, "DeploymentTargetClaim", c.Namespace, c.Name, reason) }
}

// touchClaim changes the claim's labels: each change is an update event and
// so another reconcile of the waiting claim, and a new version of the object
// an Event is about (which the event recorder does not fold into an earlier
// Event's series).
func touchClaim(t *testing.T, c *appstudiov1alpha1.DeploymentTargetClaim, times int) {
	t.Helper()
	for i := range times {
		patchClaim(t, c, func(cur *appstudiov1alpha1.DeploymentTargetClaim) {
			metav1.SetMetaDataLabel(&cur.ObjectMeta, "touched", fmt.Sprint(i))
		})
	}
}

// setSpaceRequestReady writes the SpaceRequest's Ready condition as its
// controller would (the stub writes Provisioning while it provisions and for
// what stops it), and, to make another version of it, status.targetClusterURL.
func setSpaceRequestReady(t *testing.T, sr *toolchainv1alpha1.SpaceRequest, reason, message, url string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(sr), cur); err != nil {
			return err
		}
		cur.Status.TargetClusterURL = url
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: message, ObservedGeneration: cur.Generation,
		})
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// TestClassWarningsOncePerMessage: a claim whose class parameters do not
// parse, or whose class is missing, gets one InvalidClassParameters or
// ClassNotFound Warning, not one per reconcile; a class broken another way
// is told again, and a class that becomes usable lets provisioning go on.
func TestClassWarningsOncePerMessage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("class-warn")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, `{"tierName": 5}`)
	createNamespace(t, n)
	startManager(t, 2)

	invalid := createClaim(t, n, "invalid", n, appstudiov1alpha1.SandboxProvisioner)
	g.Eventually(claimCount(invalid, claim.EventInvalidParameters)).WithTimeout(timeout).WithPolling(interval).Should(Equal(1))
	touchClaim(t, invalid, 3)
	g.Consistently(claimCount(invalid, claim.EventInvalidParameters)).WithTimeout(quiet).WithPolling(interval).
		Should(Equal(1), "one Warning, not one per reconcile")

	// Another problem with the class is another message.
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: n}, class)).To(Succeed())
	class.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"targetClusterRoles": "edit"}`)}
	g.Expect(env.Client.Update(ctx, class)).To(Succeed())
	g.Eventually(func(g Gomega) []string { return claimNotes(g, invalid, claim.EventInvalidParameters) }).
		WithTimeout(timeout).WithPolling(interval).Should(ContainElement(ContainSubstring("targetClusterRoles")))
	touchClaim(t, invalid, 2)
	g.Consistently(claimCount(invalid, claim.EventInvalidParameters)).WithTimeout(quiet).WithPolling(interval).Should(Equal(2))

	missing := createClaim(t, n, "missing", n+"-missing", appstudiov1alpha1.SandboxProvisioner)
	g.Eventually(claimCount(missing, claim.EventClassNotFound)).WithTimeout(timeout).WithPolling(interval).Should(Equal(1))
	touchClaim(t, missing, 3)
	g.Consistently(claimCount(missing, claim.EventClassNotFound)).WithTimeout(quiet).WithPolling(interval).
		Should(Equal(1), "one Warning, not one per reconcile")

	// The class appears: provisioning goes on, and no more Warnings.
	createClass(t, n+"-missing", appstudiov1alpha1.ReclaimPolicyDelete, "")
	waitForOneSpaceRequest(t, missing)
	g.Expect(claimCount(missing, claim.EventClassNotFound)(g)).To(Equal(1))
}

// TestSpaceRequestNotReadyIsReported: a SpaceRequest whose controller
// reports why it does not provision (the stub's Provisioning with "Namespace
// … already exists") is told on the claim, naming the SpaceRequest and
// quoting its condition, once the warning delay is over; once per distinct
// message, not per reconcile or per rewrite of the same condition.
func TestSpaceRequestNotReadyIsReported(t *testing.T) {
	g := NewWithT(t)
	n := unique("sr-not-ready")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManagerWith(t, 2, controller.Options{SpaceRequestWarning: kittimeout.After(time.Second)})

	c := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, c)
	foreign := fmt.Sprintf("Namespace %s-%s already exists and was not created for this SpaceRequest", sr.Namespace, sr.Name)
	setSpaceRequestReady(t, sr, toolchainv1alpha1.ReasonProvisioning, foreign, "")
	g.Eventually(func(g Gomega) []string { return claimNotes(g, c, claim.EventSpaceRequestNotReady) }).
		WithTimeout(timeout).WithPolling(interval).
		Should(ConsistOf(fmt.Sprintf("SpaceRequest %s is not Ready (Provisioning): %s", sr.Name, foreign)))

	// The same condition again (the SpaceRequest rewritten, the claim
	// reconciled): nothing new.
	setSpaceRequestReady(t, sr, toolchainv1alpha1.ReasonProvisioning, foreign, "https://other.example.com")
	touchClaim(t, c, 2)
	g.Consistently(claimCount(c, claim.EventSpaceRequestNotReady)).WithTimeout(quiet).WithPolling(interval).Should(Equal(1))

	// Another reason: told.
	setSpaceRequestReady(t, sr, "UnableToCreateSpace", "no member cluster has capacity", "")
	g.Eventually(func(g Gomega) []string { return claimNotes(g, c, claim.EventSpaceRequestNotReady) }).
		WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(fmt.Sprintf("SpaceRequest %s is not Ready (UnableToCreateSpace): no member cluster has capacity", sr.Name)))
	g.Consistently(claimCount(c, claim.EventSpaceRequestNotReady)).WithTimeout(quiet).WithPolling(interval).Should(Equal(2))

	// Ready at last: the target is made, and nothing more is told.
	playStub(t, sr)
	waitForTarget(t, c)
	g.Expect(claimCount(c, claim.EventSpaceRequestNotReady)(g)).To(Equal(2))
	// (Whether SpaceRequestUnanswered came first depends on how fast the
	// test wrote the first condition: TestSpaceRequestUnansweredIsReported.)
}

// TestSpaceRequestUnansweredIsReported: a SpaceRequest that nothing answers
// (no status at all: no SpaceRequest controller runs) is told on the claim
// once the warning delay is over, once, whatever reconciles follow.
func TestSpaceRequestUnansweredIsReported(t *testing.T) {
	g := NewWithT(t)
	n := unique("sr-unanswered")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManagerWith(t, 2, controller.Options{SpaceRequestWarning: kittimeout.After(time.Second)})

	c := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, c)
	var note string
	g.Eventually(func(g Gomega) {
		notes := claimNotes(g, c, claim.EventSpaceRequestUnanswered)
		g.Expect(notes).To(HaveLen(1))
		note = notes[0]
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(note).To(And(HavePrefix("SpaceRequest "+sr.Name+" has no status "),
		ContainSubstring("nothing answers it"), ContainSubstring("host-operator"), ContainSubstring(n)))
	touchClaim(t, c, 3)
	g.Consistently(claimCount(c, claim.EventSpaceRequestUnanswered)).WithTimeout(quiet).WithPolling(interval).Should(Equal(1))
	g.Expect(claimCount(c, claim.EventSpaceRequestNotReady)(g)).To(BeZero())
}

// countingReader counts the reads of the API server the reconciler makes
// beside its cache.
type countingReader struct {
	client.Reader
	reads atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSpaceRequestWarningWaitsForItsDelay drives the claim reconciler with a
// clock of its own. The reconcile that creates the SpaceRequest asks to come
// back when the warning delay is over (no polling); before it, no status and
// the stub's Provisioning are quiet, each reconcile asking to come back at
// the delay's end. A SpaceRequest Ready in time costs no read beyond the
// credentials Secret and tells nothing. Past the delay, a SpaceRequest still
// without status is told once (confirmed by one read of the API server), and
// its later Provisioning condition once more. A reason that is no
// provisioning in progress is told at once, without a read.
func TestSpaceRequestWarningWaitsForItsDelay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("sr-delay")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	const delay = time.Minute
	var now atomic.Pointer[time.Time]
	at := func(t time.Time) { now.Store(&t) }
	newReconciler := func() (*claim.Reconciler, *eventRecorder, *countingReader) {
		rec := &eventRecorder{}
		reader := &countingReader{Reader: env.Client}
		return &claim.Reconciler{Client: env.Client, APIReader: reader, Recorder: rec, DefaultTierName: claim.DefaultTierName,
			SpaceRequestWarning: kittimeout.After(delay), Now: func() time.Time { return *now.Load() }}, rec, reader
	}
	reconcile := func(r *claim.Reconciler, c *appstudiov1alpha1.DeploymentTargetClaim) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
	spaceRequest := func(c *appstudiov1alpha1.DeploymentTargetClaim) *toolchainv1alpha1.SpaceRequest {
		sr := &toolchainv1alpha1.SpaceRequest{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: n, Name: sandbox.ObjectName(c)}, sr)).To(Succeed())
		return sr
	}
	progress := func(sr *toolchainv1alpha1.SpaceRequest) string {
		return fmt.Sprintf("Creating namespace %s-%s and its credentials", sr.Namespace, sr.Name)
	}

	// Ready in time.
	r, rec, reader := newReconciler()
	happy := createClaim(t, n, "happy", n, appstudiov1alpha1.SandboxProvisioner)
	at(time.Now())
	g.Expect(reconcile(r, happy).RequeueAfter).To(Equal(delay), "created: back when the delay is over, should nothing answer")
	sr := spaceRequest(happy)
	at(sr.CreationTimestamp.Add(10 * time.Second))
	g.Expect(reconcile(r, happy).RequeueAfter).To(Equal(delay-10*time.Second), "no status yet: quiet until the delay is over")
	setSpaceRequestReady(t, sr, toolchainv1alpha1.ReasonProvisioning, progress(sr), "")
	at(sr.CreationTimestamp.Add(20 * time.Second))
	g.Expect(reconcile(r, happy).RequeueAfter).To(Equal(delay-20*time.Second), "provisioning: quiet until the delay is over")
	playStub(t, sr)
	at(sr.CreationTimestamp.Add(30 * time.Second))
	reconcile(r, happy)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: n, Name: sandbox.ObjectName(happy)}, &appstudiov1alpha1.DeploymentTarget{})).
		To(Succeed(), "the target is made")
	at(sr.CreationTimestamp.Add(2 * delay))
	g.Expect(reconcile(r, happy).RequeueAfter).To(BeZero(), "the wake-up finds the target: done")
	g.Expect(rec.takeNotes()).To(BeEmpty(), "nothing to tell")
	g.Expect(reader.reads.Load()).To(BeNumerically("==", 1), "only the credentials Secret is read from the API server")

	// Nothing answers.
	r, rec, reader = newReconciler()
	slow := createClaim(t, n, "slow", n, appstudiov1alpha1.SandboxProvisioner)
	at(time.Now())
	reconcile(r, slow)
	sr = spaceRequest(slow)
	at(sr.CreationTimestamp.Add(delay - time.Second))
	g.Expect(reconcile(r, slow).RequeueAfter).To(Equal(time.Second))
	g.Expect(rec.takeNotes()).To(BeEmpty())
	at(sr.CreationTimestamp.Add(delay))
	g.Expect(reconcile(r, slow).RequeueAfter).To(BeZero(), "told; its status change brings the claim back")
	g.Expect(rec.takeNotes()).To(ConsistOf(And(HavePrefix(claim.EventSpaceRequestUnanswered+": SpaceRequest "+sr.Name+" has no status 1m0s after its creation"),
		ContainSubstring("host-operator"))))
	g.Expect(reader.reads.Load()).To(BeNumerically("==", 1), "confirmed with the API server")
	at(sr.CreationTimestamp.Add(delay + time.Minute))
	reconcile(r, slow)
	g.Expect(rec.takeNotes()).To(BeEmpty(), "told once")
	g.Expect(reader.reads.Load()).To(BeNumerically("==", 1), "nothing more to confirm")

	// Now it answers, and provisioning stalls: told once more, quoting it.
	setSpaceRequestReady(t, sr, toolchainv1alpha1.ReasonProvisioning, progress(sr), "")
	reconcile(r, slow)
	reconcile(r, slow)
	g.Expect(rec.takeNotes()).To(ConsistOf(claim.EventSpaceRequestNotReady + ": SpaceRequest " + sr.Name + " is not Ready (Provisioning): " + progress(sr)))

	// A message too long for an Event is cut in its middle.
	long := "step failed: " + strings.Repeat("x", 2000) + " (the cause)"
	setSpaceRequestReady(t, sr, toolchainv1alpha1.ReasonProvisioning, long, "")
	reconcile(r, slow)
	notes := rec.takeNotes()
	g.Expect(notes).To(HaveLen(1))
	g.Expect(notes[0]).To(And(ContainSubstring("step failed: xxx"), HaveSuffix("x (the cause)"), ContainSubstring(" … ")))
	g.Expect(len(notes[0])).To(BeNumerically("<", 700))

	// Failing, not provisioning: told at once.
	r, rec, reader = newReconciler()
	failing := createClaim(t, n, "failing", n, appstudiov1alpha1.SandboxProvisioner)
	at(time.Now())
	reconcile(r, failing)
	sr = spaceRequest(failing)
	setSpaceRequestReady(t, sr, "UnableToCreateSpace", "no member cluster has capacity", "")
	at(sr.CreationTimestamp.Add(time.Second))
	g.Expect(reconcile(r, failing).RequeueAfter).To(BeZero())
	g.Expect(rec.takeNotes()).To(ConsistOf(claim.EventSpaceRequestNotReady + ": SpaceRequest " + sr.Name + " is not Ready (UnableToCreateSpace): no member cluster has capacity"))
	g.Expect(reader.reads.Load()).To(BeZero(), "what the SpaceRequest says needs no confirmation")
}

// TestSpaceRequestWarningCanBeSwitchedOff: --spacerequest-warning=none: a
// SpaceRequest without status or Provisioning is waited for in silence and
// without a wake-up.
func TestSpaceRequestWarningCanBeSwitchedOff(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("sr-nowarn")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	rec := &eventRecorder{}
	r := &claim.Reconciler{Client: env.Client, APIReader: env.Client, Recorder: rec, DefaultTierName: claim.DefaultTierName,
		SpaceRequestWarning: kittimeout.Disabled(), Now: func() time.Time { return time.Now().Add(time.Hour) }}
	c := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	for range 2 {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeZero())
	}
	g.Expect(rec.takeNotes()).To(BeEmpty())
}
