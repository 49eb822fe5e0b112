package binder_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/target"
)

// claimHidingClient is the target reconciler's cache before its claim
// informer has seen one claim, or after it lost it: reads of that claim find
// nothing and lists of claims leave it out. Every other read, and every
// write, goes to the API server.
type claimHidingClient struct {
	client.Client
	hidden types.NamespacedName
}

func (c claimHidingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appstudiov1alpha1.DeploymentTargetClaim); ok && key == c.hidden {
		return apierrors.NewNotFound(appstudiov1alpha1.SchemeGroupVersion.WithResource("deploymenttargetclaims").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c claimHidingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if claims, ok := list.(*appstudiov1alpha1.DeploymentTargetClaimList); ok {
		claims.Items = slices.DeleteFunc(claims.Items, func(x appstudiov1alpha1.DeploymentTargetClaim) bool {
			return x.Namespace == c.hidden.Namespace && x.Name == c.hidden.Name
		})
	}
	return nil
}

// TestGoneClaimConfirmedWithAPIServer: a target recording claim c (its UID)
// whose claim the cache does not show is reclaimed only once the API server
// confirms the claim is gone, or that the claim now of that name is another
// object (another UID): a cache that lags behind never deletes or releases a
// live binding. The target reconciler is built by hand (no binder runs for
// the test's namespace): its Client is a cache hiding claim c, its APIReader
// the API server.
func TestGoneClaimConfirmedWithAPIServer(t *testing.T) {
	// What the API server holds under the claim's name when the target is
	// reconciled.
	const (
		alive    = "alive"     // the claim the target records
		gone     = "gone"      // nothing
		otherUID = "other-UID" // a claim created again under the name
	)
	cases := []struct {
		name   string
		policy appstudiov1alpha1.ReclaimPolicy
		claim  string
		// deleted, released: what must become of the target (neither: untouched).
		deleted, released bool
		event             string
	}{
		{name: "alive-Delete", policy: appstudiov1alpha1.ReclaimPolicyDelete, claim: alive},
		{name: "alive-Retain", policy: appstudiov1alpha1.ReclaimPolicyRetain, claim: alive},
		{name: "gone-Delete", policy: appstudiov1alpha1.ReclaimPolicyDelete, claim: gone, deleted: true, event: target.EventClaimForceDeletedTargetDeleted},
		{name: "gone-Retain", policy: appstudiov1alpha1.ReclaimPolicyRetain, claim: gone, released: true, event: target.EventClaimForceDeletedTargetReleased},
		{name: "other-UID-Delete", policy: appstudiov1alpha1.ReclaimPolicyDelete, claim: otherUID, deleted: true, event: target.EventClaimForceDeletedTargetDeleted},
		{name: "other-UID-Retain", policy: appstudiov1alpha1.ReclaimPolicyRetain, claim: otherUID, released: true, event: target.EventClaimForceDeletedTargetReleased},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			class := newClass(t, tc.policy)
			claimKey := types.NamespacedName{Namespace: ns, Name: "c"}

			// The claim the target was bound for; no binder runs here, so it
			// has no finalizer and a delete removes it at once.
			create(t, newClaim(ns, "c", class.Name, "dt"))
			recorded := getClaim(g, ns, "c")
			if tc.claim != alive {
				g.Expect(env.Client.Delete(ctx, recorded)).To(Succeed())
				eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
			}
			if tc.claim == otherUID {
				create(t, newClaim(ns, "c", class.Name, "dt"))
				g.Expect(getClaim(g, ns, "c").UID).NotTo(Equal(recorded.UID))
			}

			// The target, Bound to the recorded claim as the binder left it.
			dt := newTarget(ns, "dt", class.Name, "c")
			dt.Annotations = map[string]string{appstudiov1alpha1.ClaimAnnotation: appstudiov1alpha1.ClaimRecord(recorded)}
			create(t, dt)
			base := dt.DeepCopy()
			dt.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseBound
			meta.SetStatusCondition(&dt.Status.Conditions, metav1.Condition{
				Type: appstudiov1alpha1.ConditionBound, Status: metav1.ConditionTrue, Reason: appstudiov1alpha1.TargetReasonBound,
				Message: "bound to claim c", ObservedGeneration: dt.Generation,
			})
			// The binder's summary of that phase.
			meta.SetStatusCondition(&dt.Status.Conditions, metav1.Condition{
				Type: appstudiov1alpha1.TargetConditionReady, Status: metav1.ConditionTrue, Reason: appstudiov1alpha1.TargetReasonBound,
				Message: "bound to claim c", ObservedGeneration: dt.Generation,
			})
			dt.Status.ObservedGeneration = dt.Generation
			g.Expect(env.Client.Status().Patch(ctx, dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
			before := getTarget(g, ns, "dt")

			cache := claimHidingClient{Client: env.Client, hidden: claimKey}
			// The cache does not show the claim, whatever the API server holds.
			g.Expect(apierrors.IsNotFound(cache.Get(ctx, claimKey, &appstudiov1alpha1.DeploymentTargetClaim{}))).To(BeTrue())
			var claims appstudiov1alpha1.DeploymentTargetClaimList
			g.Expect(cache.List(ctx, &claims, client.InNamespace(ns))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())

			rec := events.NewFakeRecorder(10)
			r := &target.Reconciler{Client: cache, APIReader: env.Client, Recorder: rec}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(ctrl.Result{}), "nothing to retry")
			close(rec.Events)
			var got []string // "<type>/<reason>"
			for e := range rec.Events {
				if f := strings.Fields(e); len(f) >= 2 {
					got = append(got, f[0]+"/"+f[1])
				}
			}

			after := &appstudiov1alpha1.DeploymentTarget{}
			err = env.Client.Get(ctx, client.ObjectKeyFromObject(dt), after)
			switch {
			case tc.deleted:
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "target not deleted: %v, %+v", err, after)
			case tc.released:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(after.DeletionTimestamp).To(BeNil(), "kept (Retain)")
				g.Expect(after.Spec.ClaimRef).To(BeNil(), "claimRef cleared")
				g.Expect(after.Annotations).NotTo(HaveKey(appstudiov1alpha1.ClaimAnnotation))
				g.Expect(after.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "a live binding was written to: %+v", after)
				g.Expect(claimRefName(after)).To(Equal("c"))
				g.Expect(after.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
				g.Expect(got).To(BeEmpty(), "a live binding changes nothing, so no Event")
			}
			if tc.event != "" {
				g.Expect(got).To(ContainElement("Normal/"+tc.event), "Events %q", got)
			}
			if tc.claim != gone {
				g.Expect(env.Client.Get(ctx, claimKey, &appstudiov1alpha1.DeploymentTargetClaim{})).To(Succeed(), "the claim on the API server is left alone")
			}
		})
	}
}

// spaceRequestIn creates SpaceRequest "space" in state "alive" or
// "deleting" (a finalizer holds it); "gone" creates nothing.
func spaceRequestIn(t *testing.T, ns, state string) {
	t.Helper()
	if state == "gone" {
		return
	}
	space := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "space", Finalizers: []string{"test.terrace.dev/hold"}},
		Spec:       toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	create(t, space)
	if state == "deleting" {
		NewWithT(t).Expect(env.Client.Delete(context.Background(), space)).To(Succeed())
	}
}

// provisionedTarget is target "dt" as the sandbox provisioner creates it
// from SpaceRequest "space" for claim, never bound.
func provisionedTarget(ns, class string, claim *appstudiov1alpha1.DeploymentTargetClaim) *appstudiov1alpha1.DeploymentTarget {
	dt := newTarget(ns, "dt", class, claim.Name)
	dt.Annotations = map[string]string{
		appstudiov1alpha1.ClaimAnnotation:         appstudiov1alpha1.ClaimRecord(claim),
		appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
		appstudiov1alpha1.SpaceRequestAnnotation:  "space",
	}
	return dt
}

// expectLeftToProvisioner: target dt was not released; it stays reserved for
// its gone claim c, Pending, saying its provisioner deletes it.
func expectLeftToProvisioner(g Gomega, ns string) {
	after := getTarget(g, ns, "dt")
	g.Expect(claimRefName(after)).To(Equal("c"), "not released")
	g.Expect(after.Annotations).To(HaveKey(appstudiov1alpha1.ClaimAnnotation))
	g.Expect(after.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhasePending))
	cond := meta.FindStatusCondition(after.Status.Conditions, appstudiov1alpha1.ConditionBound)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Reason).To(Equal(appstudiov1alpha1.TargetReasonClaimNotFound))
	g.Expect(cond.Message).To(ContainSubstring("SpaceRequest space is being deleted"))
}

// TestLateTargetIsNotReleased: a target the sandbox provisioner made for a
// claim that was force-deleted, never bound, whose SpaceRequest is being
// deleted or gone (a late target: made after the provisioner's orphan
// cleanup deleted the SpaceRequest) is not released under reclaimPolicy
// Retain: released it would be Available to the next claim while the
// namespace it names goes away. It stays reserved for the gone claim, Pending
// and saying why, for the provisioner to delete. With its SpaceRequest alive
// it is released as before. (The target reconciler, called by hand.)
func TestLateTargetIsNotReleased(t *testing.T) {
	for _, sr := range []string{"gone", "deleting", "alive"} {
		t.Run(sr, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			class := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)

			create(t, newClaim(ns, "c", class.Name, ""))
			recorded := getClaim(g, ns, "c")
			g.Expect(env.Client.Delete(ctx, recorded)).To(Succeed())
			eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
			spaceRequestIn(t, ns, sr)
			dt := provisionedTarget(ns, class.Name, recorded)
			create(t, dt)

			r := &target.Reconciler{Client: env.Client, APIReader: env.Client, Recorder: events.NewFakeRecorder(10)}
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dt)})
			g.Expect(err).NotTo(HaveOccurred())

			if sr == "alive" {
				after := getTarget(g, ns, "dt")
				g.Expect(after.Spec.ClaimRef).To(BeNil(), "released (Retain)")
				g.Expect(after.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseAvailable))
				return
			}
			expectLeftToProvisioner(g, ns)
		})
	}
}

// lateTargetOfDeletingClaim sets the scene of a claim deletion meeting a
// late target: in a new namespace, claim c (class Retain, with the binder's
// finalizer) is being deleted, and target dt was provisioned for it from
// SpaceRequest "space", which is being deleted.
func lateTargetOfDeletingClaim(t *testing.T, g Gomega) (string, *appstudiov1alpha1.DeploymentTargetClaim, *appstudiov1alpha1.DeploymentTarget) {
	t.Helper()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	c := newClaim(ns, "c", class.Name, "")
	c.Finalizers = []string{appstudiov1alpha1.ClaimFinalizer}
	create(t, c)
	spaceRequestIn(t, ns, "deleting")
	dt := provisionedTarget(ns, class.Name, getClaim(g, ns, "c"))
	create(t, dt)
	g.Expect(env.Client.Delete(context.Background(), getClaim(g, ns, "c"))).To(Succeed())
	return ns, c, dt
}

// lateTargetOfEarlierClaim sets the scene of a new claim meeting the late
// target of an earlier claim object of its name: in a new namespace, claim c
// (class Retain) was created and is gone, target dt was provisioned for it
// from SpaceRequest "space", which is being deleted, and a new claim c (with
// the binder's finalizer) exists. It returns the namespace, the earlier
// claim, the new one and the target.
func lateTargetOfEarlierClaim(t *testing.T, g Gomega) (string, *appstudiov1alpha1.DeploymentTargetClaim, *appstudiov1alpha1.DeploymentTargetClaim, *appstudiov1alpha1.DeploymentTarget) {
	t.Helper()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	create(t, newClaim(ns, "c", class.Name, ""))
	earlier := getClaim(g, ns, "c")
	g.Expect(env.Client.Delete(context.Background(), earlier)).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	spaceRequestIn(t, ns, "deleting")
	dt := provisionedTarget(ns, class.Name, earlier)
	c := newClaim(ns, "c", class.Name, "")
	c.Finalizers = []string{appstudiov1alpha1.ClaimFinalizer}
	create(t, dt, c)
	return ns, earlier, c, dt
}

// TestClaimReconcilerDoesNotReleaseLateTarget: the claim reconciler's two
// Retain paths leave a late target (above) to its provisioner too: the
// deletion of the claim it was made for, and a new claim of the same name
// finding it reserved for the earlier claim object. The binder starts once
// the scene is set, so each path meets the late target in its first
// reconcile of the claim.
func TestClaimReconcilerDoesNotReleaseLateTarget(t *testing.T) {
	t.Run("claim-deletion", func(t *testing.T) {
		g := NewWithT(t)
		ns, _, _ := lateTargetOfDeletingClaim(t, g)

		startBinder(t, binder.Options{}, ns)
		eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
		g.Eventually(func(g Gomega) { expectLeftToProvisioner(g, ns) }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
	t.Run("new-claim-of-the-name", func(t *testing.T) {
		g := NewWithT(t)
		ns, earlier, _, _ := lateTargetOfEarlierClaim(t, g)

		startBinder(t, binder.Options{}, ns)
		// Provisioning is decided after reclaimEarlier, in the same reconcile.
		eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
		after := getTarget(g, ns, "dt")
		g.Expect(claimRefName(after)).To(Equal("c"), "not released")
		g.Expect(after.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, appstudiov1alpha1.ClaimRecord(earlier)))
	})
}
