package controller_test

// Edge cases of the provisioner's cooperation with the binder and with
// whoever else edits its objects: a claim switched to another class, a claim
// naming another target, a target whose annotations were edited away, a
// SpaceRequest deleted out of band.

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/orphan"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/target"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// quiet is how long a Consistently watches for something that must not
// happen; the thing, if it happened, would within a reconcile or two.
const quiet = 3 * time.Second

// patchClaim changes the claim as its user would.
func patchClaim(t *testing.T, claim *appstudiov1alpha1.DeploymentTargetClaim, mutate func(*appstudiov1alpha1.DeploymentTargetClaim)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &appstudiov1alpha1.DeploymentTargetClaim{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), cur); err != nil {
			return err
		}
		mutate(cur)
		return env.Client.Update(context.Background(), cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// occurrences counts how often an Event of reason was recorded about the
// target named name. The recorder folds a repeat of an Event (same reason,
// object, type) into the first Event's series instead of creating another
// Event, so a repeat shows as a series on the one Event.
func occurrences(g Gomega, ns, name, reason string) int {
	return occurrencesOf(g, "DeploymentTarget", ns, name, reason)
}

// occurrencesOf counts, like occurrences, the Events of reason about the
// object of kind named name.
func occurrencesOf(g Gomega, kind, ns, name, reason string) int {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Kind != kind || e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		n++
		if e.Series != nil {
			n += int(e.Series.Count)
		}
	}
	return n
}

// TestOrphanTargetReclaimedByItsOwnClass: a pending claim switched from a
// Delete class to a Retain class keeps its SpaceRequest (labelled with the
// old class), and its target is made with the new class. The claim deleted
// before binding, the never-bound target goes by the target's class (Retain:
// kept), as the dt-binder would decide, not by the SpaceRequest's label.
func TestOrphanTargetReclaimedByItsOwnClass(t *testing.T) {
	g := NewWithT(t)
	n := unique("class-switch")
	ctx := context.Background()
	createClass(t, n+"-delete", appstudiov1alpha1.ReclaimPolicyDelete, "")
	createClass(t, n+"-retain", appstudiov1alpha1.ReclaimPolicyRetain, "")
	createNamespace(t, n)
	startManager(t, 2)

	claim := createClaim(t, n, "switched", n+"-delete", appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	g.Expect(appstudiov1alpha1.ClassOf(sr)).To(Equal(n + "-delete"))
	patchClaim(t, claim, func(c *appstudiov1alpha1.DeploymentTargetClaim) { c.Spec.DeploymentTargetClassName = n + "-retain" })
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	// The target as the provisioner makes it from the switched claim (made
	// by hand before the SpaceRequest is Ready, so that no provisioner with a
	// cache still showing the old class races it).
	dt := lateTarget(t, claim, sr)
	g.Expect(dt.Spec.DeploymentTargetClassName).To(Equal(n + "-retain"))
	playStub(t, sr)
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())

	// The target's class (Retain) decides.
	expectOrphanRetained(g, n, sr, dt)
}

// TestClaimNamingAnotherTargetIsNotProvisioned: a marked claim whose
// spec.targetName names another target is bound by the binder to that target
// only: the provisioner makes nothing for it. A claim naming the very target
// the provisioner makes for it is provisioned as usual.
func TestClaimNamingAnotherTargetIsNotProvisioned(t *testing.T) {
	g := NewWithT(t)
	n := unique("named")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)

	named := &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "named", Annotations: map[string]string{
			appstudiov1alpha1.ProvisionerAnnotation: appstudiov1alpha1.SandboxProvisioner,
		}},
		Spec: appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: n, TargetName: "elsewhere"},
	}
	g.Expect(env.Client.Create(context.Background(), named)).To(Succeed())
	// Created last, provisioned, then named after its own target: by the
	// time its SpaceRequest exists, the provisioner has seen the first.
	sentinel := createClaim(t, n, "sentinel", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, sentinel)
	patchClaim(t, sentinel, func(c *appstudiov1alpha1.DeploymentTargetClaim) { c.Spec.TargetName = sandbox.ObjectName(c) })
	playStub(t, sr)
	waitForTarget(t, sentinel)

	g.Consistently(func(g Gomega) []toolchainv1alpha1.SpaceRequest { return spaceRequestsOf(g, named) }).
		WithTimeout(quiet).WithPolling(interval).Should(BeEmpty(), "nothing is provisioned for a claim naming another target")
}

// TestSpaceRequestOfClaimNamingAnotherTargetIsDeleted: a claim that names
// another target in spec.targetName after its SpaceRequest was made, and
// from which no target was made yet, leaves a SpaceRequest nothing will use:
// the orphan reconciler deletes it (confirmed with the API server), and no
// new one is made. A target a provisioner with a stale cache makes from it
// afterwards is deleted too (the binder would count it held by the claim and
// refuse the target the claim names). Once spec.targetName is cleared again,
// provisioning resumes.
func TestSpaceRequestOfClaimNamingAnotherTargetIsDeleted(t *testing.T) {
	g := NewWithT(t)
	n := unique("renamed")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyRetain, "")
	createNamespace(t, n)
	startManager(t, 2)

	claim := createClaim(t, n, "renamed", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	patchClaim(t, claim, func(c *appstudiov1alpha1.DeploymentTargetClaim) { c.Spec.TargetName = "elsewhere" })
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: sr.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(),
		"the unused SpaceRequest is deleted, whatever the policy (Retain here)")
	g.Eventually(eventReasons(n, sr.Name)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(orphan.EventOrphanDeleted))
	g.Consistently(func(g Gomega) []toolchainv1alpha1.SpaceRequest { return spaceRequestsOf(g, claim) }).
		WithTimeout(quiet).WithPolling(interval).Should(BeEmpty(), "and none is made again")

	dt := lateTarget(t, claim, sr)
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "a late target of the claim is deleted")

	patchClaim(t, claim, func(c *appstudiov1alpha1.DeploymentTargetClaim) { c.Spec.TargetName = "" })
	again := waitForOneSpaceRequest(t, claim)
	g.Expect(again.Name).To(Equal(sr.Name))
	g.Expect(again.UID).NotTo(Equal(sr.UID), "a new SpaceRequest")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(again), again)).To(Succeed())
	g.Expect(again.DeletionTimestamp).To(BeNil())
}

// TestTargetWithoutAnnotationsIsReleased: a provisioned target whose
// provisioned-by annotation (or both its annotations) was edited away still
// carries the provisioner's finalizer; deleting it deletes its SpaceRequest
// and then releases the finalizer, instead of hanging for ever. A target that
// carries the finalizer but names no SpaceRequest the provisioner made is
// released without deleting anything.
func TestTargetWithoutAnnotationsIsReleased(t *testing.T) {
	g := NewWithT(t)
	n := unique("unannotated")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)

	for _, drop := range [][]string{
		{appstudiov1alpha1.ProvisionedByAnnotation},
		{appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SpaceRequestAnnotation},
	} {
		claim := createClaim(t, n, unique("c"), n, appstudiov1alpha1.SandboxProvisioner)
		sr := waitForOneSpaceRequest(t, claim)
		playStub(t, sr)
		dt := waitForTarget(t, claim)
		base := dt.DeepCopy()
		for _, key := range drop {
			delete(dt.Annotations, key)
		}
		g.Expect(env.Client.Patch(ctx, dt, client.MergeFrom(base))).To(Succeed())
		bindAndDeleteTarget(t, claim, dt, sr)
		releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
		g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "released without %v", drop)
	}

	// Not the provisioner's SpaceRequest (no claim label): kept.
	foreign := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "foreign"},
		Spec:       toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	dt := &appstudiov1alpha1.DeploymentTarget{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: foreign.Name, Finalizers: []string{appstudiov1alpha1.TargetFinalizer}},
		Spec: appstudiov1alpha1.DeploymentTargetSpec{DeploymentTargetClassName: n,
			KubernetesClusterCredentials: appstudiov1alpha1.DeploymentTargetKubernetesClusterCredentials{
				DefaultNamespace: n, APIURL: apiURL, ClusterCredentialsSecret: "foreign-kubeconfig",
			}},
	}
	g.Expect(env.Client.Create(ctx, dt)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, dt)).To(Succeed())
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "released")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	g.Expect(foreign.DeletionTimestamp).To(BeNil(), "a SpaceRequest the provisioner did not make is not deleted")
}

// TestSpaceRequestDeletedOutOfBandIsReported: a live, Bound target whose
// SpaceRequest someone else deletes says so in one Warning Event (not one
// per reconcile, nor a second when the SpaceRequest is finally gone), and is
// kept; the same when the SpaceRequest goes at once (no finalizer holds it).
func TestSpaceRequestDeletedOutOfBandIsReported(t *testing.T) {
	n := unique("out-of-band")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)
	for _, held := range []bool{true, false} {
		deleteSpaceRequestOutOfBand(t, n, held)
	}
}

func deleteSpaceRequestOutOfBand(t *testing.T, n string, held bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	claim := createClaim(t, n, unique("c"), n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	playStub(t, sr)
	dt := waitForTarget(t, claim)
	// Play the binder: both bound.
	base := claim.DeepCopy()
	claim.Annotations[appstudiov1alpha1.BindCompleteAnnotation] = appstudiov1alpha1.AnnotationTrue
	g.Expect(env.Client.Patch(ctx, claim, client.MergeFrom(base))).To(Succeed())
	g.Eventually(func() error {
		cur := &appstudiov1alpha1.DeploymentTarget{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur); err != nil {
			return err
		}
		cur.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseBound
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Consistently(eventReasons(n, dt.Name)).WithTimeout(quiet).WithPolling(interval).
		ShouldNot(ContainElement(target.EventSpaceRequestDeletedOutOfBand), "nothing to report while the SpaceRequest lives")

	if !held {
		releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	}
	// Someone deletes the SpaceRequest.
	g.Expect(env.Client.Delete(ctx, &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: sr.Name}})).To(Succeed())
	g.Eventually(eventReasons(n, dt.Name)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(target.EventSpaceRequestDeletedOutOfBand), "held by a finalizer: %v", held)
	if held {
		// Then it is gone (a new event, the target reconciled again).
		releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	}
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: sr.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Consistently(func(g Gomega) int { return occurrences(g, n, dt.Name, target.EventSpaceRequestDeletedOutOfBand) }).
		WithTimeout(quiet).WithPolling(interval).Should(Equal(1), "reported once (held by a finalizer: %v)", held)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), dt)).To(Succeed())
	g.Expect(dt.DeletionTimestamp).To(BeNil(), "the target is kept")
	g.Expect(dt.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))
}

// TestUnableToTerminateReportedOncePerEpisode: a deleting target whose
// SpaceRequest reports UnableToTerminate gets one SpaceRequestUnableToTerminate
// Event, not one per reconcile: the binder's writes to the target (its
// Terminating condition, then phase Failed) and further writes to the
// SpaceRequest that keep the reason bring the target back without a second
// Event. A new episode (the SpaceRequest recovers to Terminating, then fails
// again) is reported again.
func TestUnableToTerminateReportedOncePerEpisode(t *testing.T) {
	g := NewWithT(t)
	n := unique("unable")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)
	claim := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	playStub(t, sr)
	dt := waitForTarget(t, claim)
	bindAndDeleteTarget(t, claim, dt, sr)

	since := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	setReady := func(reason, message string, ltt metav1.Time) {
		t.Helper()
		g.Eventually(func() error {
			cur := &toolchainv1alpha1.SpaceRequest{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur); err != nil {
				return err
			}
			cur.Status.Conditions = []metav1.Condition{{
				Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: reason, Message: message, LastTransitionTime: ltt, ObservedGeneration: cur.Generation,
			}}
			return env.Client.Status().Update(ctx, cur)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}
	// playBinder writes the target's status as the binder does while it waits.
	playBinder := func(mutate func(*appstudiov1alpha1.DeploymentTargetStatus)) {
		t.Helper()
		g.Eventually(func() error {
			cur := &appstudiov1alpha1.DeploymentTarget{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dt), cur); err != nil {
				return err
			}
			mutate(&cur.Status)
			return env.Client.Status().Update(ctx, cur)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}
	count := func(g Gomega) int { return occurrences(g, n, dt.Name, target.EventSpaceRequestNotTerminate) }

	setReady(toolchainv1alpha1.ReasonUnableToTerminate, "namespace still there", since)
	g.Eventually(count).WithTimeout(timeout).WithPolling(interval).Should(Equal(1))

	// The same episode: the binder reports it on the target, the SpaceRequest
	// controller rewrites its message, the binder turns the target Failed.
	playBinder(func(st *appstudiov1alpha1.DeploymentTargetStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: appstudiov1alpha1.ConditionTerminating, Status: metav1.ConditionTrue,
			Reason: appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest, Message: "SpaceRequest reports UnableToTerminate",
		})
	})
	setReady(toolchainv1alpha1.ReasonUnableToTerminate, "namespace still there (configmap finalizer)", since)
	playBinder(func(st *appstudiov1alpha1.DeploymentTargetStatus) {
		st.Phase = appstudiov1alpha1.DeploymentTargetPhaseFailed
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: appstudiov1alpha1.ConditionTerminating, Status: metav1.ConditionTrue,
			Reason: appstudiov1alpha1.TerminatingReasonUnableToTerminate, Message: "unable to terminate",
		})
	})
	g.Consistently(count).WithTimeout(quiet).WithPolling(interval).Should(Equal(1), "one episode, one Event")

	// A new episode: recovered, then unable again.
	// (Should the two writes reach the reconciler as one, the new
	// lastTransitionTime still marks a new episode.)
	setReady(toolchainv1alpha1.ReasonTerminating, "retrying", since)
	setReady(toolchainv1alpha1.ReasonUnableToTerminate, "namespace still there", metav1.NewTime(since.Add(time.Minute)))
	g.Eventually(count).WithTimeout(timeout).WithPolling(interval).Should(Equal(2))
	g.Consistently(count).WithTimeout(quiet).WithPolling(interval).Should(Equal(2))

	releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the target is released and gone")
}
