package binder_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
)

// TestDeletedClaimLeavesTargetItNeverBound: a target a user pre-bound to a
// claim by name (spec.claimRef, no claim record) that the claim never bound
// is not the claim's to reclaim, as a pre-bound PersistentVolume whose
// claimRef has no UID is never reclaimed: deleting the claim neither deletes
// it (Delete) nor clears its claimRef (Retain). It stays reserved for the
// claim's name, Pending, ClaimNotFound. Two ways to get there: the claim
// names another target in spec.targetName (Pending, TargetNameConflict), or
// it is deleted before it binds its pre-bound target (it has the binder's
// finalizer, from a reconcile before the record was written).
func TestDeletedClaimLeavesTargetItNeverBound(t *testing.T) {
	for _, policy := range []appstudiov1alpha1.ReclaimPolicy{appstudiov1alpha1.ReclaimPolicyDelete, appstudiov1alpha1.ReclaimPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) { testDeletedClaimLeavesTargetItNeverBound(t, policy) })
	}
}

func testDeletedClaimLeavesTargetItNeverBound(t *testing.T, policy appstudiov1alpha1.ReclaimPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, policy)

	// Deleted before it binds: the binder is not running yet; the claim
	// carries its finalizer and is being deleted when the binder first sees it.
	create(t, newTarget(ns, "byoc-early", class.Name, "early"))
	early := newClaim(ns, "early", class.Name, "")
	early.Finalizers = []string{appstudiov1alpha1.ClaimFinalizer}
	create(t, early)
	g.Expect(env.Client.Delete(ctx, early)).To(Succeed())
	startBinder(t, binder.Options{}, ns)

	// Names another target: the pre-bound one is never bound.
	create(t, newTarget(ns, "byoc", class.Name, "c1"), newTarget(ns, "free-a", class.Name, ""))
	eventuallyTarget(t, ns, "free-a", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "c1", class.Name, "free-a"))
	c := eventuallyClaim(t, ns, "c1", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonTargetNameConflict)
	msg := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound).Message
	g.Expect(msg).To(ContainSubstring("which this claim never bound, is left as it is"))
	g.Expect(msg).NotTo(ContainSubstring("reclaimPolicy applies"))
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())

	for claimName, dt := range map[string]string{"early": "byoc-early", "c1": "byoc"} {
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}})
		g.Eventually(func(g Gomega) {
			got := getTarget(g, ns, dt)
			g.Expect(got.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhasePending))
			g.Expect(boundReason(got.Status.Conditions)).To(Equal(appstudiov1alpha1.TargetReasonClaimNotFound), "target %s, once claim %s is gone", dt, claimName)
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}
	g.Consistently(func(g Gomega) {
		for claimName, dt := range map[string]string{"early": "byoc-early", "c1": "byoc"} {
			got := getTarget(g, ns, dt)
			g.Expect(got.DeletionTimestamp).To(BeNil(), "target %s is not deleted", dt)
			g.Expect(claimRefName(got)).To(Equal(claimName), "target %s keeps its pre-binding", dt)
			g.Expect(got.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation))
		}
		free := getTarget(g, ns, "free-a")
		g.Expect(free.DeletionTimestamp).To(BeNil())
		g.Expect(free.Spec.ClaimRef).To(BeNil())
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
}

// TestLostClaimDoesNotBindTargetOfSameName: a claim whose target is deleted
// is Lost and never looks for another target (rule B), even one created later
// under the deleted target's name, when spec.targetName was written by the
// binder (best match): the claim stays Lost and the new target stays free. A
// name the user set in spec.targetName is the user's choice: that claim binds
// the target of that name created later.
func TestLostClaimDoesNotBindTargetOfSameName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "a", class.Name, ""))
	eventuallyTarget(t, ns, "a", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "best", class.Name, ""))
	c := eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(c.Spec.TargetName).To(Equal("a"))
	g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.BoundByControllerAnnotation, appstudiov1alpha1.AnnotationTrue))
	create(t, newTarget(ns, "u", class.Name, ""))
	eventuallyTarget(t, ns, "u", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "named", class.Name, "u"))
	eventuallyClaim(t, ns, "named", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)

	for _, dt := range []string{"a", "u"} {
		g.Expect(env.Client.Delete(ctx, getTarget(g, ns, dt))).To(Succeed())
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dt}})
	}
	eventuallyClaim(t, ns, "best", appstudiov1alpha1.DeploymentTargetClaimPhaseLost, appstudiov1alpha1.BindReasonTargetLost)
	eventuallyClaim(t, ns, "named", appstudiov1alpha1.DeploymentTargetClaimPhaseLost, appstudiov1alpha1.BindReasonTargetLost)

	// Unrelated free targets under the old names.
	create(t, newTarget(ns, "a", class.Name, ""), newTarget(ns, "u", class.Name, ""))
	eventuallyClaim(t, ns, "named", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	eventuallyTarget(t, ns, "u", appstudiov1alpha1.DeploymentTargetPhaseBound, "named")
	eventuallyTarget(t, ns, "a", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	g.Consistently(func(g Gomega) {
		got := getClaim(g, ns, "best")
		g.Expect(got.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseLost))
		g.Expect(boundReason(got.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonTargetLost))
		g.Expect(getTarget(g, ns, "a").Spec.ClaimRef).To(BeNil(), "the new target a is not claimed")
	}).WithTimeout(consistency).WithPolling(poll).Should(Succeed())
}
