package binder_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/claim"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/target"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

// TestPreBoundTargetGetsClaimRecord: a target a user pre-bound to a claim by
// name (spec.claimRef set by hand, before the claim exists or after) gets the
// record of the claim object when the claim binds it, as a pre-bound
// PersistentVolume gets its claimRef.uid: from then on it is that claim
// object's only. A claim of the same name created after the first went by
// force does not inherit it (the reclaimPolicy of its class is applied for
// the gone claim, and the new claim is provisioned as any new claim), and a
// claim that goes by force with no claim of its name coming back has its
// target reclaimed, as for any target the binder bound.
func TestPreBoundTargetGetsClaimRecord(t *testing.T) {
	for _, policy := range []appstudiov1alpha1.ReclaimPolicy{appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) { testPreBoundTargetGetsClaimRecord(t, policy) })
	}
}

func testPreBoundTargetGetsClaimRecord(t *testing.T, policy appstudiov1alpha1.ReclaimPolicy) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, policy)
	stop := startBinder(t, binder.Options{}, ns)

	// "before": the target names the claim before the claim exists.
	create(t, newTarget(ns, "pre-before", class.Name, "before"))
	eventuallyTarget(t, ns, "pre-before", appstudiov1alpha1.DeploymentTargetPhasePending, "before")
	create(t, newClaim(ns, "before", class.Name, ""))
	// "after": the claim exists first (no free target: marked for
	// provisioning), then a user pre-binds a target to it.
	create(t, newClaim(ns, "after", class.Name, ""))
	eventuallyClaim(t, ns, "after", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	create(t, newTarget(ns, "pre-after", class.Name, "after"))

	for n, dt := range map[string]string{"before": "pre-before", "after": "pre-after"} {
		c := eventuallyClaim(t, ns, n, appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
		g.Expect(c.Spec.TargetName).To(Equal(dt))
		got := eventuallyTarget(t, ns, dt, appstudiov1alpha1.DeploymentTargetPhaseBound, n)
		g.Expect(got.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, appstudiov1alpha1.ClaimRecord(c)),
			"target %s records the claim object that bound it", dt)
	}

	// "before" goes by force and comes back under its name while the binder
	// is stopped (its target still reports Bound, naming "before").
	stop()
	forceDelete(t, ns, "before")
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before"}})
	create(t, newClaim(ns, "before", class.Name, ""))
	startBinder(t, binder.Options{}, ns)
	// "after" goes by force with the binder running; its name never comes back.
	forceDelete(t, ns, "after")
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"}})

	// The new "before" does not inherit the old one's target: no free
	// target, so it is provisioned as any new claim.
	c := eventuallyClaim(t, ns, "before", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(c.Annotations).NotTo(HaveKey(appstudiov1alpha1.BindCompleteAnnotation))
	if policy == appstudiov1alpha1.ReclaimPolicyDelete {
		for _, dt := range []string{"pre-before", "pre-after"} {
			eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dt}})
		}
		g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "before") }).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement("Normal/" + claim.EventEarlierClaimTargetDeleted))
		g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "pre-after") }).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement("Normal/" + target.EventClaimForceDeletedTargetDeleted))
		return
	}
	for _, dt := range []string{"pre-before", "pre-after"} {
		got := eventuallyTarget(t, ns, dt, appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
		g.Expect(got.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation), dt)
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "before") }).WithTimeout(timeout).WithPolling(poll).
		Should(ContainElement("Normal/" + claim.EventEarlierClaimTargetReleased))
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "pre-after") }).WithTimeout(timeout).WithPolling(poll).
		Should(ContainElement("Normal/" + target.EventClaimForceDeletedTargetReleased))
	g.Consistently(func(g Gomega) {
		g.Expect(getClaim(g, ns, "before").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhasePending))
		g.Expect(getTarget(g, ns, "pre-before").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
}

// eventCounts counts the Events regarding the object named name in ns by
// "<type>/<reason>", each occurrence of a series counted (the events.k8s.io
// recorder folds repeats of one Event into a series instead of new objects).
func eventCounts(g Gomega, ns, name string) map[string]int {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Name != name {
			continue
		}
		n := 1
		if e.Series != nil && e.Series.Count > 1 {
			n = int(e.Series.Count)
		}
		out[e.Type+"/"+e.Reason] += n
	}
	return out
}

// TestOneEventPerBinding: one binding is one Event on each side, no more:
// the claim's Bound ("bound to target …") and the target's Bound (its phase
// change), for a static binding (spec.targetName), a best match and a
// target pre-bound by a user. The claimRef write (or the record written on a
// pre-bound target) on the way is logged and traced, not an Event of its
// own, and later reconciles (a label change) add none.
func TestOneEventPerBinding(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "wanted", class.Name, ""), newTarget(ns, "best", class.Name, ""), newTarget(ns, "pre", class.Name, "prebound"))
	eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	eventuallyTarget(t, ns, "best", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	eventuallyTarget(t, ns, "pre", appstudiov1alpha1.DeploymentTargetPhasePending, "prebound")
	create(t, newClaim(ns, "static", class.Name, "wanted"))
	eventuallyClaim(t, ns, "static", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	// "static" took "wanted"; the best match is the only free one left.
	create(t, newClaim(ns, "bestmatch", class.Name, ""), newClaim(ns, "prebound", class.Name, ""))
	targets := map[string]string{"static": "wanted", "bestmatch": "best", "prebound": "pre"}
	for c, dt := range targets {
		eventuallyClaim(t, ns, c, appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
		eventuallyTarget(t, ns, dt, appstudiov1alpha1.DeploymentTargetPhaseBound, c)
	}
	for c := range targets {
		patchLabel(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c}})
	}

	// Before the binding, a free target reported Available and the
	// pre-bound one Pending (ClaimNotFound); the binding adds one Bound each.
	before := map[string]string{"wanted": "Normal/" + appstudiov1alpha1.TargetReasonAvailable,
		"best": "Normal/" + appstudiov1alpha1.TargetReasonAvailable, "pre": "Normal/" + appstudiov1alpha1.TargetReasonClaimNotFound}
	want := func(c string) (claimEvents, targetEvents map[string]int) {
		return map[string]int{"Normal/" + appstudiov1alpha1.BindReasonBound: 1},
			map[string]int{before[targets[c]]: 1, "Normal/" + appstudiov1alpha1.TargetReasonBound: 1}
	}
	g.Eventually(func(g Gomega) {
		for c, dt := range targets {
			claimEvents, targetEvents := want(c)
			g.Expect(eventCounts(g, ns, c)).To(Equal(claimEvents), "Events of claim %s", c)
			g.Expect(eventCounts(g, ns, dt)).To(Equal(targetEvents), "Events of target %s", dt)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for c, dt := range targets {
			claimEvents, targetEvents := want(c)
			g.Expect(eventCounts(g, ns, c)).To(Equal(claimEvents), "Events of claim %s", c)
			g.Expect(eventCounts(g, ns, dt)).To(Equal(targetEvents), "Events of target %s", dt)
		}
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
}

// TestOldClassTargetReclaimedWhenClaimBindsElsewhere: a claim marked again
// for a new class's provisioner (ProvisionerChanged) while the old class's
// provisioner was at work gets a target under each class. Once the claim is
// bound to the new class's target, the old class's target (made for this
// claim object, never bound) is not needed: as the PersistentVolume
// controller does for a volume provisioned for a claim bound elsewhere, the
// reclaimPolicy of its class is applied at once (Delete: deleted, for its
// provisioner to delete its SpaceRequest; Retain: claimRef cleared,
// Available), with an Event. Should the claim's target then go, the claim is
// Lost; it never takes the old class's target it never bound.
func TestOldClassTargetReclaimedWhenClaimBindsElsewhere(t *testing.T) {
	for _, policy := range []appstudiov1alpha1.ReclaimPolicy{appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) {
			const otherProvisioner = "provisioner.example.com/other"
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			old := newClass(t, policy)
			other := newClassFor(t, otherProvisioner)
			startBinder(t, binder.Options{}, ns)
			create(t, newClaim(ns, "c", old.Name, ""))
			c := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
			setClaimClass(t, ns, "c", other.Name)
			g.Eventually(func(g Gomega) {
				g.Expect(getClaim(g, ns, "c").Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, otherProvisioner))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

			// Both provisioners deliver: the new class's target, then the
			// old one's (its SpaceRequest was in flight), as each provisioner
			// makes them (the claim record in the create).
			newer := newTarget(ns, "new", other.Name, "c")
			newer.Annotations = map[string]string{
				appstudiov1alpha1.ClaimAnnotation:         appstudiov1alpha1.ClaimRecord(c),
				appstudiov1alpha1.ProvisionedByAnnotation: otherProvisioner,
			}
			create(t, newer)
			eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
			spaceRequestIn(t, ns, "alive")
			older := provisionedTarget(ns, old.Name, c)
			older.Name = "old"
			older.Finalizers = []string{appstudiov1alpha1.TargetFinalizer}
			create(t, older)

			if policy == appstudiov1alpha1.ReclaimPolicyDelete {
				g.Eventually(func(g Gomega) {
					g.Expect(getTarget(g, ns, "old").DeletionTimestamp).NotTo(BeNil(), "deleted (its provisioner removes the finalizer)")
				}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
				g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "old") }).WithTimeout(timeout).WithPolling(poll).
					Should(ContainElement("Normal/" + target.EventClaimBoundElsewhereTargetDeleted))
			} else {
				dt := eventuallyTarget(t, ns, "old", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
				g.Expect(dt.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation))
				g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "old") }).WithTimeout(timeout).WithPolling(poll).
					Should(ContainElement("Normal/" + target.EventClaimBoundElsewhereTargetReleased))
			}
			c = eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
			g.Expect(c.Spec.TargetName).To(Equal("new"))

			// The claim's target goes: Lost, not bound to the old class's.
			g.Expect(env.Client.Delete(ctx, getTarget(g, ns, "new"))).To(Succeed())
			eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseLost, appstudiov1alpha1.BindReasonTargetLost)
			g.Consistently(func(g Gomega) {
				g.Expect(getClaim(g, ns, "c").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseLost))
				g.Expect(getTarget(g, ns, "old").Status.Phase).NotTo(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
			}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
		})
	}
}
