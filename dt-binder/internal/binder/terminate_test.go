package binder_test

// What kubectl get dt shows while a target lives and while it is being
// deleted, and when a target whose SpaceRequest cannot terminate turns Failed.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/target"
)

// printed returns the columns the API server prints for the target (what
// kubectl get dt -o wide shows), by column name; an empty cell is "".
func printed(g Gomega, ns, name string) map[string]string {
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().
		AbsPath("/apis/appstudio.redhat.com/v1alpha1/namespaces", ns, "deploymenttargets", name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	var table metav1.Table
	g.Expect(json.Unmarshal(raw, &table)).To(Succeed())
	g.Expect(table.Rows).To(HaveLen(1))
	cols := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		if cell := table.Rows[0].Cells[i]; cell != nil {
			cols[c.Name] = fmt.Sprint(cell)
		} else {
			cols[c.Name] = ""
		}
	}
	return cols
}

// eventuallyPrinted waits until kubectl get dt would show the target with
// phase and reason, and a message containing message; and until its Ready
// condition has status ready.
func eventuallyPrinted(t *testing.T, ns, name string, phase appstudiov1alpha1.DeploymentTargetPhase, reason, message string, ready metav1.ConditionStatus) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cols := printed(g, ns, name)
		g.Expect(cols).To(HaveKeyWithValue("Phase", string(phase)))
		g.Expect(cols).To(HaveKeyWithValue("Reason", reason))
		g.Expect(cols["Message"]).To(ContainSubstring(message))
		dt := getTarget(g, ns, name)
		c := meta.FindStatusCondition(dt.Status.Conditions, appstudiov1alpha1.TargetConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(ready))
		g.Expect(c.ObservedGeneration).To(Equal(dt.Generation))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestPrinterColumnsFollowPhase: the Reason and Message columns of kubectl
// get dt read the Ready condition, which follows the phase: a target being
// deleted shows why it waits, and a Failed one that its SpaceRequest could
// not terminate (not "Bound", "bound to claim …", which the Bound condition
// still says: it describes the binding only). Available and Released targets
// show theirs.
func TestPrinterColumnsFollowPhase(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	del := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	ret := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	startBinder(t, binder.Options{UnableToTerminateTimeout: 2 * time.Second}, ns)

	bindDynamically(t, ns, ret.Name, "kept", "released")
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "kept"))).To(Succeed())
	eventuallyPrinted(t, ns, "released", appstudiov1alpha1.DeploymentTargetPhaseReleased, appstudiov1alpha1.TargetReasonReleased, "released", metav1.ConditionFalse)

	bindDynamically(t, ns, del.Name, "stuck", "dt")
	eventuallyPrinted(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseBound, appstudiov1alpha1.TargetReasonBound, "bound to claim stuck", metav1.ConditionTrue)
	sr := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "stuck-sr",
			Labels:     map[string]string{appstudiov1alpha1.ClaimLabel: "stuck"},
			Finalizers: []string{toolchainv1alpha1.Finalizer},
		},
		Spec: toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	create(t, sr)
	// The claim's deletion deletes the target; the provisioner (by hand)
	// deletes its SpaceRequest.
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "stuck"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(getTarget(g, ns, "dt").DeletionTimestamp).NotTo(BeNil()) }).
		WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, sr)).To(Succeed())
	eventuallyPrinted(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseBound, appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest,
		"waiting for SpaceRequest stuck-sr", metav1.ConditionFalse)

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	sr.Status.Conditions = []metav1.Condition{{
		Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: toolchainv1alpha1.ReasonUnableToTerminate, Message: "configmap held by a finalizer",
		LastTransitionTime: metav1.Now(),
	}}
	g.Expect(env.Client.Status().Update(ctx, sr)).To(Succeed())
	eventuallyPrinted(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseFailed, appstudiov1alpha1.TerminatingReasonUnableToTerminate,
		"configmap held by a finalizer", metav1.ConditionFalse)
	bound := meta.FindStatusCondition(getTarget(g, ns, "dt").Status.Conditions, appstudiov1alpha1.ConditionBound)
	g.Expect(bound).NotTo(BeNil())
	g.Expect(bound.Reason).To(Equal(appstudiov1alpha1.TargetReasonBound), "the Bound condition still names the claim the target was bound to")

	// The SpaceRequest finally goes: the columns say so; the provisioner
	// (by hand) completes the deletion.
	removeFinalizer(t, sr, toolchainv1alpha1.Finalizer)
	eventuallyPrinted(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseFailed, appstudiov1alpha1.TerminatingReasonSpaceRequestGone,
		"no SpaceRequest is left", metav1.ConditionFalse)
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dt"}})

	// Created last, so that no claim above binds it.
	create(t, newTarget(ns, "free", ret.Name, ""))
	eventuallyPrinted(t, ns, "free", appstudiov1alpha1.DeploymentTargetPhaseAvailable, appstudiov1alpha1.TargetReasonAvailable, "unclaimed", metav1.ConditionTrue)
}

// TestUnableToTerminateCountsFromDeletion: seed 004, step 5 — the target
// turns Failed "if the SpaceRequest still exists after 2 minutes, and has"
// Ready reason UnableToTerminate. The 2 minutes run from the SpaceRequest's
// deletion: a SpaceRequest controller that reports UnableToTerminate after 2
// minutes of trying (as the seed's does) makes the target Failed at once,
// not 2 minutes later. The target reconciler is run by hand with a clock of
// the test's (no binder runs).
func TestUnableToTerminateCountsFromDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	const limit = 2 * time.Minute

	dt := newTarget(ns, "dt", class.Name, "c", appstudiov1alpha1.TargetFinalizer)
	dt.Annotations = map[string]string{appstudiov1alpha1.SpaceRequestAnnotation: "sr"}
	create(t, dt)
	sr := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sr", Finalizers: []string{toolchainv1alpha1.Finalizer}},
		Spec:       toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	create(t, sr)
	g.Expect(env.Client.Delete(ctx, getTarget(g, ns, "dt"))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, sr)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	deleted := sr.DeletionTimestamp.Time

	// reconcileAt has the SpaceRequest report UnableToTerminate since
	// unableSince, and reconciles the target at now.
	reconcileAt := func(now, unableSince time.Time) (ctrl.Result, *appstudiov1alpha1.DeploymentTarget) {
		t.Helper()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
		sr.Status.Conditions = []metav1.Condition{{
			Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: toolchainv1alpha1.ReasonUnableToTerminate, Message: "space could not be deleted",
			LastTransitionTime: metav1.NewTime(unableSince),
		}}
		g.Expect(env.Client.Status().Update(ctx, sr)).To(Succeed())
		r := &target.Reconciler{Client: env.Client, APIReader: env.Client, Recorder: events.NewFakeRecorder(10),
			UnableToTerminateTimeout: limit, Now: func() time.Time { return now }}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)})
		g.Expect(err).NotTo(HaveOccurred())
		return res, getTarget(g, ns, "dt")
	}
	terminating := func(dt *appstudiov1alpha1.DeploymentTarget) string {
		if c := meta.FindStatusCondition(dt.Status.Conditions, appstudiov1alpha1.ConditionTerminating); c != nil {
			return c.Reason
		}
		return ""
	}

	// Unable to terminate at once: not Failed before 2 minutes from the
	// deletion; the reconciler comes back then.
	res, got := reconcileAt(deleted.Add(limit/2), deleted)
	g.Expect(got.Status.Phase).NotTo(Equal(appstudiov1alpha1.DeploymentTargetPhaseFailed))
	g.Expect(terminating(got)).To(Equal(appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest))
	g.Expect(res.RequeueAfter).To(BeNumerically("~", limit/2, time.Second))

	// Reported after 2 minutes of trying, as the SpaceRequest controller
	// does: the SpaceRequest still exists 2 minutes after its deletion, so
	// the target is Failed now, not 2 minutes after the report.
	reported := deleted.Add(limit)
	_, got = reconcileAt(reported.Add(time.Second), reported)
	g.Expect(got.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseFailed), "conditions %+v", got.Status.Conditions)
	g.Expect(terminating(got)).To(Equal(appstudiov1alpha1.TerminatingReasonUnableToTerminate))
	g.Expect(got.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))

	removeFinalizer(t, sr, toolchainv1alpha1.Finalizer)
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
}

// TestClaimSaysItsTargetFailed: a deleted claim waits for its target to go
// (reclaimPolicy Delete); when the target turns Failed (its SpaceRequest
// cannot terminate), the claim's Bound condition says so, quotes why, and
// points at the target's status and events, instead of only waiting.
func TestClaimSaysItsTargetFailed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{UnableToTerminateTimeout: time.Second}, ns)
	bindDynamically(t, ns, class.Name, "c", "dt")
	sr := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "c-sr",
			Labels:     map[string]string{appstudiov1alpha1.ClaimLabel: "c"},
			Finalizers: []string{toolchainv1alpha1.Finalizer},
		},
		Spec: toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	create(t, sr)

	bound := func(g Gomega) *metav1.Condition {
		c := meta.FindStatusCondition(getClaim(g, ns, "c").Status.Conditions, appstudiov1alpha1.ConditionBound)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "c"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getTarget(g, ns, "dt").DeletionTimestamp).NotTo(BeNil())
		c := bound(g)
		g.Expect(c.Reason).To(Equal(appstudiov1alpha1.BindReasonDeletingTarget))
		g.Expect(c.Message).To(Equal("waiting for target dt to be deleted (reclaimPolicy Delete)"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The provisioner (by hand) deletes the SpaceRequest, which cannot
	// terminate: the target turns Failed.
	g.Expect(env.Client.Delete(ctx, sr)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	const stuck = "configmap held by a finalizer"
	sr.Status.Conditions = []metav1.Condition{{
		Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: toolchainv1alpha1.ReasonUnableToTerminate, Message: stuck,
		LastTransitionTime: metav1.Now(),
	}}
	g.Expect(env.Client.Status().Update(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetPhase { return getTarget(g, ns, "dt").Status.Phase }).
		WithTimeout(timeout).WithPolling(poll).Should(Equal(appstudiov1alpha1.DeploymentTargetPhaseFailed))
	g.Eventually(func(g Gomega) {
		c := bound(g)
		g.Expect(c.Reason).To(Equal(appstudiov1alpha1.BindReasonDeletingTarget))
		g.Expect(c.Message).To(SatisfyAll(
			HavePrefix("waiting for target dt to be deleted (reclaimPolicy Delete); the target's phase is Failed"),
			ContainSubstring(appstudiov1alpha1.TerminatingReasonUnableToTerminate+": "),
			ContainSubstring(stuck),
			HaveSuffix("kubectl describe deploymenttarget dt -n "+ns)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The SpaceRequest goes, the provisioner (by hand) completes the
	// target's deletion: the claim goes.
	removeFinalizer(t, sr, toolchainv1alpha1.Finalizer)
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
}
