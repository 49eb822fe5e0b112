package binder_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/claim"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/target"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

// setClaimClass changes a claim's spec.deploymentTargetClassName, as a user would.
func setClaimClass(t *testing.T, ns, name, class string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := getClaim(g, ns, name)
		base := c.DeepCopy()
		c.Spec.DeploymentTargetClassName = class
		g.Expect(env.Client.Patch(context.Background(), c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestClassChangedAfterBinding: seed 004 expects claims to change. A bound
// claim whose spec.deploymentTargetClassName is changed keeps its target,
// like a bound PersistentVolumeClaim keeps its volume: it stays Bound, reason
// ClassChanged, and the target stays Bound. Deleting the claim reclaims that
// target by the policy of the class it was bound under (the target's), not
// the claim's new class: a Delete target is deleted even though the claim now
// names a Retain class, and a Retain target is released even though the claim
// now names a Delete class.
func TestClassChangedAfterBinding(t *testing.T) {
	t.Run("bound-under-Delete", func(t *testing.T) {
		testClassChangedAfterBinding(t, appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain)
	})
	t.Run("bound-under-Retain", func(t *testing.T) {
		testClassChangedAfterBinding(t, appstudiov1alpha1.ReclaimPolicyRetain, appstudiov1alpha1.ReclaimPolicyDelete)
	})
}

func testClassChangedAfterBinding(t *testing.T, boundUnder, changedTo appstudiov1alpha1.ReclaimPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	original := newClass(t, boundUnder)
	changed := newClass(t, changedTo)
	startBinder(t, binder.Options{}, ns)
	bindDynamically(t, ns, original.Name, "c", "dt")
	// A free target of the new class: the claim must not take it.
	create(t, newTarget(ns, "free", changed.Name, ""))
	eventuallyTarget(t, ns, "free", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")

	setClaimClass(t, ns, "c", changed.Name)
	c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonClassChanged)
	cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound)
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "the claim is still bound")
	g.Expect(cond.Message).To(And(ContainSubstring("dt"), ContainSubstring(original.Name), ContainSubstring(changed.Name)))
	g.Expect(c.Spec.TargetName).To(Equal("dt"))
	eventuallyTarget(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")
	// The target's own reconcile says so too (it may follow the claim's).
	g.Eventually(func(g Gomega) string { return boundReason(getTarget(g, ns, "dt").Status.Conditions) }).
		WithTimeout(timeout).WithPolling(poll).Should(Equal(appstudiov1alpha1.TargetReasonClassChanged))
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "c") }).WithTimeout(timeout).WithPolling(poll).
		Should(ContainElement("Warning/" + appstudiov1alpha1.BindReasonClassChanged))
	g.Consistently(func(g Gomega) {
		g.Expect(getClaim(g, ns, "c").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))
		g.Expect(getTarget(g, ns, "dt").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
		g.Expect(getTarget(g, ns, "free").Spec.ClaimRef).To(BeNil(), "a class change binds no second target")
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())

	// Changed back, the claim is plainly Bound again.
	setClaimClass(t, ns, "c", original.Name)
	eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Eventually(func(g Gomega) string { return boundReason(getTarget(g, ns, "dt").Status.Conditions) }).
		WithTimeout(timeout).WithPolling(poll).Should(Equal(appstudiov1alpha1.TargetReasonBound))

	// Changed again, then deleted: the target's class decides.
	setClaimClass(t, ns, "c", changed.Name)
	eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonClassChanged)
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "c"))).To(Succeed())
	if boundUnder == appstudiov1alpha1.ReclaimPolicyDelete {
		g.Eventually(func(g Gomega) {
			g.Expect(getTarget(g, ns, "dt").DeletionTimestamp).NotTo(BeNil(), "the target is deleted (its class says Delete)")
			g.Expect(boundReason(getClaim(g, ns, "c").Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonDeletingTarget))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dt"}})
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	} else {
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
		dt := eventuallyTarget(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
		g.Expect(dt.DeletionTimestamp).To(BeNil(), "the target is kept (its class says Retain)")
	}
	g.Expect(getTarget(g, ns, "free").Spec.ClaimRef).To(BeNil())
}

// dropClaimRecord takes the claim record off a bound target, as a target
// bound before the record existed has none (the binder records the claim on
// a target naming it without the record when it binds it, and leaves a bound
// one as it is).
func dropClaimRecord(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		dt := getTarget(g, ns, name)
		base := dt.DeepCopy()
		delete(dt.Annotations, appstudiov1alpha1.ClaimAnnotation)
		g.Expect(env.Client.Patch(context.Background(), dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// forceDelete deletes a claim as a user who removes its finalizer by force
// does: the finalizer write and a delete preconditioned on that write's
// resourceVersion (the binder, running, adds its finalizer back to a claim
// that is not being deleted), retried until the claim goes without the
// binder having acted on its deletion.
func forceDelete(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		c := getClaim(g, ns, name)
		c.Finalizers = nil
		g.Expect(env.Client.Update(ctx, c)).To(Succeed())
		rv := c.ResourceVersion
		g.Expect(env.Client.Delete(ctx, c, client.Preconditions{ResourceVersion: &rv})).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestNewClaimNamedInReleasedTarget: a Released target that still names its
// claim (the claim's finalizer was removed by force, so nothing cleared the
// claimRef) is never bound again automatically; a new claim of that name is
// not stuck behind it: it binds another free target, or is dynamically
// provisioned, as any claim. Named by spec.targetName, it is refused with
// TargetNotAvailable.
func TestNewClaimNamedInReleasedTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	other := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	// releasedFor leaves a Released target naming claim: bound, then the
	// claim's finalizer removed by force. The target records no claim
	// object, as one bound before the record existed.
	releasedFor := func(claimName, targetName, className string) {
		t.Helper()
		bindDynamically(t, ns, className, claimName, targetName)
		dropClaimRecord(t, ns, targetName)
		forceDelete(t, ns, claimName)
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}})
		eventuallyTarget(t, ns, targetName, appstudiov1alpha1.DeploymentTargetPhaseReleased, claimName)
	}

	// Best match: a free target is there.
	releasedFor("best", "old-best", class.Name)
	create(t, newTarget(ns, "free", class.Name, ""))
	eventuallyTarget(t, ns, "free", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "best", class.Name, ""))
	c := eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(c.Spec.TargetName).To(Equal("free"))
	eventuallyTarget(t, ns, "free", appstudiov1alpha1.DeploymentTargetPhaseBound, "best")

	// Dynamic provisioning: nothing is free. The Released target is of
	// another class than the new claim's, too.
	releasedFor("dyn", "old-dyn", other.Name)
	create(t, newClaim(ns, "dyn", class.Name, ""))
	c = eventuallyClaim(t, ns, "dyn", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound).Message).
		To(ContainSubstring("old-dyn names this claim but was Released"))
	// Playing the provisioner: its target binds.
	dt := newTarget(ns, "new-dyn", class.Name, "dyn", appstudiov1alpha1.TargetFinalizer)
	dt.Annotations = map[string]string{appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner}
	create(t, dt)
	eventuallyTarget(t, ns, "new-dyn", appstudiov1alpha1.DeploymentTargetPhaseBound, "dyn")
	eventuallyClaim(t, ns, "dyn", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)

	// Static: the user names the Released target itself.
	releasedFor("static", "old-static", class.Name)
	create(t, newClaim(ns, "static", class.Name, "old-static"))
	c = eventuallyClaim(t, ns, "static", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonTargetNotAvailable)
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound).Message).To(ContainSubstring("Released"))

	// The Released targets stay as they are; deleting the new claims
	// reclaims only what they hold.
	for _, n := range []string{"best", "dyn"} {
		g.Expect(env.Client.Delete(ctx, getClaim(g, ns, n))).To(Succeed())
	}
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"}})
	g.Eventually(func(g Gomega) {
		g.Expect(getTarget(g, ns, "new-dyn").DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	for _, n := range []string{"old-best", "old-dyn", "old-static"} {
		dt := getTarget(g, ns, n)
		g.Expect(dt.DeletionTimestamp).To(BeNil(), n)
		g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased), n)
	}
}

// TestClassAndTargetNameChangedAfterBinding: a bound claim whose class and
// spec.targetName are both changed keeps its target, as for a class change
// alone, but the targetName change is not silently ignored: the claim stays
// Bound with reason ClassAndTargetNameChanged, whose message (and Warning
// Event) names both changes; the target now named is not claimed.
func TestClassAndTargetNameChangedAfterBinding(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	original := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	changed := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	startBinder(t, binder.Options{}, ns)
	bindDynamically(t, ns, original.Name, "c", "dt")
	create(t, newTarget(ns, "other", changed.Name, ""))
	eventuallyTarget(t, ns, "other", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")

	// Both in one write.
	g.Eventually(func(g Gomega) {
		c := getClaim(g, ns, "c")
		base := c.DeepCopy()
		c.Spec.DeploymentTargetClassName = changed.Name
		c.Spec.TargetName = "other"
		g.Expect(env.Client.Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonClassAndTargetNameChanged)
	cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound)
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "the claim keeps its target")
	bothChanges := And(ContainSubstring("target dt"), ContainSubstring(original.Name), ContainSubstring(changed.Name),
		ContainSubstring("spec.targetName (now other)"), ContainSubstring("spec.deploymentTargetClassName"))
	g.Expect(cond.Message).To(bothChanges)
	g.Eventually(func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == "c" && e.Type == "Warning" && e.Reason == appstudiov1alpha1.BindReasonClassAndTargetNameChanged {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}).WithTimeout(timeout).WithPolling(poll).Should(ContainElement(bothChanges))
	g.Consistently(func(g Gomega) {
		got := getClaim(g, ns, "c")
		g.Expect(got.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))
		g.Expect(boundReason(got.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonClassAndTargetNameChanged))
		g.Expect(getTarget(g, ns, "dt").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
		g.Expect(getTarget(g, ns, "other").Spec.ClaimRef).To(BeNil(), "no second target is claimed")
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())

	// Deleted, the claim reclaims the target it holds by the target's class
	// (Delete), not the new one's.
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "c"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getTarget(g, ns, "dt").DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	g.Expect(getTarget(g, ns, "other").Spec.ClaimRef).To(BeNil())
}

// TestRecreatedClaimDoesNotInheritTarget: a claim deleted by force (its
// finalizer removed by hand) and created again under the same name before its
// target turned Released is a new object; like a PersistentVolume bound to a
// claim UID that no longer exists, its target (the binder's claimRef write,
// and a provisioned target, record the claim's UID) is not inherited: the
// reclaimPolicy of the target's class is applied for the old claim (Delete:
// deleted; Retain: released, Released) and the new claim binds a free target,
// or is provisioned, as any new claim.
func TestRecreatedClaimDoesNotInheritTarget(t *testing.T) {
	for _, policy := range []appstudiov1alpha1.ReclaimPolicy{appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) { testRecreatedClaim(t, policy) })
	}
}

func testRecreatedClaim(t *testing.T, policy appstudiov1alpha1.ReclaimPolicy) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, policy)
	// "dyn" is of a class of its own, so that the new "dyn" does not race
	// the new "best" for the one free target.
	dynClass := newClass(t, policy)
	stop := startBinder(t, binder.Options{}, ns)

	// "best" bound by best match (the binder writes the record), "dyn" to
	// a provisioned target (recorded as the sandbox provisioner does).
	create(t, newTarget(ns, "old-best", class.Name, ""))
	eventuallyTarget(t, ns, "old-best", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "best", class.Name, ""))
	eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	oldBest := getClaim(g, ns, "best")
	g.Expect(getTarget(g, ns, "old-best").Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, "best/"+string(oldBest.UID)))

	create(t, newClaim(ns, "dyn", dynClass.Name, ""))
	eventuallyClaim(t, ns, "dyn", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	oldDyn := getClaim(g, ns, "dyn")
	prov := newTarget(ns, "old-dyn", dynClass.Name, "dyn", appstudiov1alpha1.TargetFinalizer)
	prov.Annotations = map[string]string{
		appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
		appstudiov1alpha1.ClaimAnnotation:         "dyn/" + string(oldDyn.UID),
	}
	create(t, prov)
	eventuallyClaim(t, ns, "dyn", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	eventuallyTarget(t, ns, "old-dyn", appstudiov1alpha1.DeploymentTargetPhaseBound, "dyn")

	// With the binder stopped, so that the targets cannot turn Released in
	// between: both claims go by force and come back under their names.
	stop()
	for n, cls := range map[string]string{"best": class.Name, "dyn": dynClass.Name} {
		forceDelete(t, ns, n)
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
		create(t, newClaim(ns, n, cls, ""))
	}
	create(t, newTarget(ns, "free", class.Name, ""))
	startBinder(t, binder.Options{}, ns)

	c := eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(c.Spec.TargetName).To(Equal("free"), "the new claim binds a free target, not the old claim's")
	g.Expect(getTarget(g, ns, "free").Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, "best/"+string(c.UID)))
	c = eventuallyClaim(t, ns, "dyn", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))

	if policy == appstudiov1alpha1.ReclaimPolicyDelete {
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-best"}})
		g.Eventually(func(g Gomega) {
			g.Expect(getTarget(g, ns, "old-dyn").DeletionTimestamp).NotTo(BeNil(), "deleted for the old claim (its provisioner removes the finalizer)")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		for _, n := range []string{"best", "dyn"} {
			g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, n) }).WithTimeout(timeout).WithPolling(poll).
				Should(ContainElement("Normal/" + claim.EventEarlierClaimTargetDeleted))
		}
		return
	}
	for _, n := range []string{"old-best", "old-dyn"} {
		dt := eventuallyTarget(t, ns, n, appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
		g.Expect(dt.DeletionTimestamp).To(BeNil(), "kept (Retain)")
		g.Expect(dt.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation))
	}
	for _, n := range []string{"best", "dyn"} {
		g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, n) }).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement("Normal/" + claim.EventEarlierClaimTargetReleased))
	}
	g.Consistently(func(g Gomega) {
		g.Expect(getClaim(g, ns, "dyn").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhasePending))
		g.Expect(getTarget(g, ns, "old-best").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
}

// TestForceDeletedClaimTargetReclaimed: a claim deleted by force (its
// finalizer removed by hand) whose name never comes back. Like a
// PersistentVolume whose bound claim UID no longer exists, a target that
// records the claim object it was bound for (ClaimAnnotation) gets the
// reclaimPolicy of its class applied for the gone claim by the target
// reconciler: Delete deletes it, Retain clears its claimRef (Released). That
// holds for a target bound by best match (the binder's record), a provisioned
// one (the provisioner's record), and one left
// Released naming the gone claim (binder stopped meanwhile). A target without
// the record — pre-bound by a user to a claim that does not exist, or bound
// with the record taken off — is left as it is.
func TestForceDeletedClaimTargetReclaimed(t *testing.T) {
	for _, policy := range []appstudiov1alpha1.ReclaimPolicy{appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) { testForceDeletedClaim(t, policy) })
	}
}

func testForceDeletedClaim(t *testing.T, policy appstudiov1alpha1.ReclaimPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, policy)
	stop := startBinder(t, binder.Options{}, ns)

	// provisioned plays the sandbox provisioner: a target for claim, with
	// the record of the claim object (recorded: true) or without.
	provisioned := func(claimName, targetName string, recorded bool) {
		t.Helper()
		create(t, newClaim(ns, claimName, class.Name, ""))
		c := eventuallyClaim(t, ns, claimName, appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
		dt := newTarget(ns, targetName, class.Name, claimName, appstudiov1alpha1.TargetFinalizer)
		dt.Annotations = map[string]string{appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner}
		if recorded {
			dt.Annotations[appstudiov1alpha1.ClaimAnnotation] = appstudiov1alpha1.ClaimRecord(c)
		}
		create(t, dt)
		eventuallyTarget(t, ns, targetName, appstudiov1alpha1.DeploymentTargetPhaseBound, claimName)
		eventuallyClaim(t, ns, claimName, appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	}

	// "best" binds by best match (the binder writes the record).
	create(t, newTarget(ns, "old-best", class.Name, ""))
	eventuallyTarget(t, ns, "old-best", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "best", class.Name, ""))
	eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(getTarget(g, ns, "old-best").Annotations).To(HaveKey(appstudiov1alpha1.ClaimAnnotation))
	provisioned("dyn", "old-dyn", true)
	provisioned("left", "old-left", true)
	provisioned("norecord", "old-norecord", false)
	// Pre-bound by a user to a claim that does not exist (yet).
	create(t, newTarget(ns, "prebound", class.Name, "nobody"))
	eventuallyTarget(t, ns, "prebound", appstudiov1alpha1.DeploymentTargetPhasePending, "nobody")

	// "left": left Released: the claim went by force while
	// the binder was stopped, and the target turned Released, still naming
	// it (set by hand here).
	stop()
	dropClaimRecord(t, ns, "old-norecord")
	forceDelete(t, ns, "left")
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left"}})
	g.Eventually(func(g Gomega) {
		dt := getTarget(g, ns, "old-left")
		base := dt.DeepCopy()
		dt.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseReleased
		meta.SetStatusCondition(&dt.Status.Conditions, metav1.Condition{
			Type: appstudiov1alpha1.ConditionBound, Status: metav1.ConditionFalse, Reason: appstudiov1alpha1.TargetReasonReleased,
			Message: "claim left was deleted", ObservedGeneration: dt.Generation,
		})
		g.Expect(env.Client.Status().Patch(ctx, dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	startBinder(t, binder.Options{}, ns)

	// The others go by force with the binder running; no claim of their
	// names ever comes back.
	for _, n := range []string{"best", "dyn", "norecord"} {
		forceDelete(t, ns, n)
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
	}

	reclaimed := []string{"old-best", "old-dyn", "old-left"}
	if policy == appstudiov1alpha1.ReclaimPolicyDelete {
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-best"}})
		for _, n := range []string{"old-dyn", "old-left"} {
			g.Eventually(func(g Gomega) {
				g.Expect(getTarget(g, ns, n).DeletionTimestamp).NotTo(BeNil(), "%s is deleted for its gone claim (its provisioner removes the finalizer)", n)
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		}
		for _, n := range reclaimed {
			g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, n) }).WithTimeout(timeout).WithPolling(poll).
				Should(ContainElement("Normal/"+target.EventClaimForceDeletedTargetDeleted), n)
		}
	} else {
		for _, n := range reclaimed {
			dt := eventuallyTarget(t, ns, n, appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
			g.Expect(dt.DeletionTimestamp).To(BeNil(), "%s is kept (Retain)", n)
			g.Expect(dt.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation), n)
			g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, n) }).WithTimeout(timeout).WithPolling(poll).
				Should(ContainElement("Normal/"+target.EventClaimForceDeletedTargetReleased), n)
		}
	}

	// Without the record the binder cannot tell a gone claim from one yet to
	// come: those targets wait for their claim, as before.
	eventuallyTarget(t, ns, "old-norecord", appstudiov1alpha1.DeploymentTargetPhaseReleased, "norecord")
	g.Consistently(func(g Gomega) {
		for n, claimName := range map[string]string{"old-norecord": "norecord", "prebound": "nobody"} {
			dt := getTarget(g, ns, n)
			g.Expect(dt.DeletionTimestamp).To(BeNil(), n)
			g.Expect(claimRefName(dt)).To(Equal(claimName), n)
		}
		g.Expect(getTarget(g, ns, "prebound").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhasePending))
		g.Expect(getTarget(g, ns, "old-norecord").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
		if policy == appstudiov1alpha1.ReclaimPolicyRetain {
			for _, n := range reclaimed {
				dt := getTarget(g, ns, n)
				g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased), n)
				g.Expect(dt.Spec.ClaimRef).To(BeNil(), n)
			}
		}
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
	for _, n := range []string{"old-norecord", "prebound"} {
		g.Expect(observabilitytest.EventReasons(g, env.Client, ns, n)).NotTo(ContainElement(BeElementOf(
			target.EventClaimForceDeletedTargetDeleted, target.EventClaimForceDeletedTargetReleased)), n)
	}
}

// setClaimTargetName changes a claim's spec.targetName, as a user would.
func setClaimTargetName(t *testing.T, ns, name, targetName string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := getClaim(g, ns, name)
		base := c.DeepCopy()
		c.Spec.TargetName = targetName
		g.Expect(env.Client.Patch(context.Background(), c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// TestTargetNameThenClassChangedBindsNoSecondTarget: a bound claim whose
// spec.targetName is changed, and then (in a second write) its class, keeps
// the target it holds: it stays Bound, reason TargetNameConflict after the
// first write and ClassAndTargetNameChanged after the second, and the target
// stays Bound. Whatever spec.targetName names — a free target of another
// class, a target that does not exist, a target claimed by another claim —
// the reason is TargetNameConflict: the claim holds a target, and that is
// what the user must know. No second target is ever bound.
func TestTargetNameThenClassChangedBindsNoSecondTarget(t *testing.T) {
	for _, tc := range []struct{ name, targetName string }{
		{"free-target-of-another-class", "other"},
		{"missing-target", "missing"},
		{"target-claimed-by-another-claim", "taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			classA := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
			classB := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
			startBinder(t, binder.Options{}, ns)
			create(t, newTarget(ns, "dt", classA.Name, ""))
			eventuallyTarget(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
			// Best match: the binder writes claimRef and the claim record.
			create(t, newClaim(ns, "c", classA.Name, ""))
			eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
			create(t, newTarget(ns, "other", classB.Name, ""), newTarget(ns, "taken", classA.Name, "x"))
			eventuallyTarget(t, ns, "other", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")

			setClaimTargetName(t, ns, "c", tc.targetName)
			c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonTargetNameConflict)
			cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound)
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "the claim still holds dt")
			g.Expect(cond.Message).To(ContainSubstring("target dt is bound to this claim"))
			g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "c") }).WithTimeout(timeout).WithPolling(poll).
				Should(ContainElement("Warning/" + appstudiov1alpha1.BindReasonTargetNameConflict))
			// The target reconciler keeps reporting the held target Bound.
			g.Consistently(func(g Gomega) {
				dt := getTarget(g, ns, "dt")
				g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
				g.Expect(meta.IsStatusConditionTrue(dt.Status.Conditions, appstudiov1alpha1.ConditionBound)).To(BeTrue(), "%+v", dt.Status.Conditions)
				g.Expect(getClaim(g, ns, "c").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))
			}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())

			setClaimClass(t, ns, "c", classB.Name)
			eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonClassAndTargetNameChanged)
			g.Consistently(func(g Gomega) {
				g.Expect(getTarget(g, ns, "other").Spec.ClaimRef).To(BeNil(), "no second target is bound")
				g.Expect(claimRefName(getTarget(g, ns, "taken"))).To(Equal("x"))
				dt := getTarget(g, ns, "dt")
				g.Expect(claimRefName(dt)).To(Equal("c"))
				g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
				c := getClaim(g, ns, "c")
				g.Expect(c.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))
				g.Expect(boundReason(c.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonClassAndTargetNameChanged))
			}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
		})
	}
}

// newClassFor creates a class whose provisioner is provisioner.
func newClassFor(t *testing.T, provisioner string) *appstudiov1alpha1.DeploymentTargetClass {
	t.Helper()
	c := &appstudiov1alpha1.DeploymentTargetClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cls-"},
		Spec:       appstudiov1alpha1.DeploymentTargetClassSpec{Provisioner: provisioner, ReclaimPolicy: appstudiov1alpha1.ReclaimPolicyDelete},
	}
	create(t, c)
	return c
}

// TestClassChangedWhileProvisioning: a claim marked for dynamic provisioning
// whose class is changed, unbound and with no target provisioned for it yet,
// is marked for the new class's provisioner (the provisioner acts on the mark
// alone), with an Event. If a target was already provisioned for it under the
// old class, the claim is not marked again and says why.
func TestClassChangedWhileProvisioning(t *testing.T) {
	const otherProvisioner = "provisioner.example.com/other"
	t.Run("nothing-provisioned-yet", func(t *testing.T) {
		g := NewWithT(t)
		ns := newNamespace(t)
		sandbox := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
		other := newClassFor(t, otherProvisioner)
		startBinder(t, binder.Options{}, ns)
		create(t, newClaim(ns, "c", sandbox.Name, ""))
		c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
		g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))

		setClaimClass(t, ns, "c", other.Name)
		g.Eventually(func(g Gomega) {
			c := getClaim(g, ns, "c")
			g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, otherProvisioner))
			g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
			g.Expect(boundReason(c.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonProvisioning))
			g.Expect(meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound).Message).To(ContainSubstring(otherProvisioner))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "c") }).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement("Normal/" + claim.EventProvisionerChanged))
	})
	t.Run("target-provisioned-under-old-class", func(t *testing.T) {
		g := NewWithT(t)
		ns := newNamespace(t)
		sandbox := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
		other := newClassFor(t, otherProvisioner)
		// The claim was marked under the sandbox class, the provisioner made
		// its target, and the user changed the class before the binder saw
		// the target (the binder starts once the scene is set).
		c := newClaim(ns, "c", other.Name, "")
		c.Annotations = map[string]string{appstudiov1alpha1.ProvisionerAnnotation: appstudiov1alpha1.SandboxProvisioner}
		create(t, c)
		dt := newTarget(ns, "dt", sandbox.Name, "c")
		dt.Annotations = map[string]string{
			appstudiov1alpha1.ClaimAnnotation:         appstudiov1alpha1.ClaimRecord(getClaim(g, ns, "c")),
			appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
		}
		create(t, dt)
		startBinder(t, binder.Options{}, ns)
		got := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhasePending, claim.BindReasonProvisionedUnderOtherClass)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, appstudiov1alpha1.ConditionBound).Message).
			To(And(ContainSubstring("target dt was provisioned for this claim"), ContainSubstring(other.Name)))
		g.Consistently(func(g Gomega) {
			g.Expect(getClaim(g, ns, "c").Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner),
				"not marked again while a provisioned target names it")
			g.Expect(getTarget(g, ns, "dt").Status.Phase).NotTo(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
		}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
	})
}
