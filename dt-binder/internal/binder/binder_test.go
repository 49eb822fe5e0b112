package binder_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

const seedsDir = "../../../examples/seeds"

// applySeed creates the object of a seed YAML file verbatim (namespaced
// objects go to ns, as `kubectl apply -n ns` would put them).
func applySeed(t *testing.T, file, ns string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(seedsDir, file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "DeploymentTargetClass" {
		u.SetNamespace(ns)
	}
	err = env.Client.Create(context.Background(), u)
	clusterScopedExists := apierrors.IsAlreadyExists(err) && u.GetNamespace() == "" // the class is shared by tests
	if err != nil && !clusterScopedExists {
		t.Fatalf("applying %s: %v", file, err)
	}
	return u
}

// TestSeed004DynamicProvisioning walks seed 004 steps 0-3 with the seed's YAML
// verbatim (class, claim, Environment): the claim turns Pending with the
// dt-provisioner annotation. Playing the provisioner (step 6), a target naming
// the claim appears; the binder makes it Bound (step 7), then the claim Bound
// with bind-complete and bound-by-controller (step 8).
func TestSeed004DynamicProvisioning(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startBinder(t, binder.Options{}, ns)
	statuses := watchClaimStatuses(t, ns)

	applySeed(t, "004-step0-deploymenttargetclass.yaml", ns)
	applySeed(t, "004-step1-deploymenttargetclaim.yaml", ns)
	applySeed(t, "004-step2-environment.yaml", ns)

	claim := eventuallyClaim(t, ns, "staging-dtc", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))
	g.Expect(claim.Finalizers).To(ContainElement(appstudiov1alpha1.ClaimFinalizer))

	// Step 6, by hand: the provisioner's target (the seed's step-6 object,
	// with claimRef pointing at this claim).
	u := &unstructured.Unstructured{}
	data, err := os.ReadFile(filepath.Join(seedsDir, "004-step6-deploymenttarget.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed())
	u.SetNamespace(ns)
	g.Expect(unstructured.SetNestedField(u.Object, "staging-dtc", "spec", "claimRef", "name")).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), u)).To(Succeed())

	dt := eventuallyTarget(t, ns, "prod-dt", appstudiov1alpha1.DeploymentTargetPhaseBound, "staging-dtc")
	g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))
	claim = eventuallyClaim(t, ns, "staging-dtc", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.BindCompleteAnnotation, "true"))
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.BoundByControllerAnnotation, "true"))
	g.Expect(claim.Spec.TargetName).To(Equal("prod-dt"), "a claim bound by the binder names its target, like a PVC's volumeName")
	// That spec change is the binder's own: the status observes it.
	g.Expect(claim.Status.ObservedGeneration).To(Equal(claim.Generation))
	g.Expect(meta.FindStatusCondition(claim.Status.Conditions, appstudiov1alpha1.ConditionBound).ObservedGeneration).To(Equal(claim.Generation))

	// Events say what happened, with filterable reasons.
	g.Eventually(func(g Gomega) {
		g.Expect(observabilitytest.EventReasons(g, env.Client, ns, "staging-dtc")).To(ConsistOf(appstudiov1alpha1.BindReasonBound))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The wait for the provisioner is one status write: the claim is
	// Pending, Provisioning from its first status until it is Bound.
	g.Eventually(statuses.get).WithTimeout(timeout).WithPolling(poll).Should(HaveExactElements(
		"Pending/Provisioning", "Bound/Bound"))
}

// claimStatuses records, from a watch, each distinct status a namespace's
// claims went through ("<phase>/<Bound reason>", marked when a Bound status
// observes an older generation than the claim's; consecutive versions with
// the same status count once).
type claimStatuses struct {
	mu   sync.Mutex
	seen []string
	last string
}

func (c *claimStatuses) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

func watchClaimStatuses(t *testing.T, ns string) *claimStatuses {
	t.Helper()
	w, err := watchClient(t).Watch(context.Background(), &appstudiov1alpha1.DeploymentTargetClaimList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cs := &claimStatuses{}
	go func() {
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*appstudiov1alpha1.DeploymentTargetClaim)
			if !ok || c.Status.Phase == "" {
				continue
			}
			st := fmt.Sprintf("%s/%s", c.Status.Phase, boundReason(c.Status.Conditions))
			if c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound && c.Status.ObservedGeneration != c.Generation {
				// A Bound status written for a spec older than the claim's.
				st += " of an older generation"
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound); cond != nil {
				st += "\x00" + cond.Message
			}
			cs.mu.Lock()
			if st != cs.last {
				cs.last = st
				cs.seen = append(cs.seen, strings.SplitN(st, "\x00", 2)[0])
			}
			cs.mu.Unlock()
		}
	}()
	return cs
}

// TestStaticBindingByTargetName: spec.targetName binds exactly that target;
// the user chose it, so there is no bound-by-controller annotation.
func TestStaticBindingByTargetName(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "older", class.Name, ""), newTarget(ns, "wanted", class.Name, ""))
	eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "c", class.Name, "wanted"))

	claim := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.BindCompleteAnnotation, "true"))
	g.Expect(claim.Annotations).NotTo(HaveKey(appstudiov1alpha1.BoundByControllerAnnotation))
	g.Expect(claim.Annotations).NotTo(HaveKey(appstudiov1alpha1.ProvisionerAnnotation))
	eventuallyTarget(t, ns, "wanted", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")
	eventuallyTarget(t, ns, "older", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
}

// TestChangedTargetNameBindsNoSecondTarget: seed 004 expects claims to
// change. A bound claim whose spec.targetName is changed to another free
// target keeps the one it holds (reason TargetNameConflict) instead of
// claiming a second, and deleting it applies the class's reclaim policy to
// the target it held.
func TestChangedTargetNameBindsNoSecondTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "first", class.Name, ""), newTarget(ns, "second", class.Name, ""))
	eventuallyTarget(t, ns, "second", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	create(t, newClaim(ns, "c", class.Name, "first"))
	eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)

	claim := getClaim(g, ns, "c")
	base := claim.DeepCopy()
	claim.Spec.TargetName = "second"
	g.Expect(env.Client.Patch(ctx, claim, client.MergeFrom(base))).To(Succeed())
	// Still bound: the claim keeps its target, as after a class change.
	claim = eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonTargetNameConflict)
	g.Expect(meta.FindStatusCondition(claim.Status.Conditions, appstudiov1alpha1.ConditionBound).Message).To(ContainSubstring("target first is bound to this claim"))
	g.Expect(getTarget(g, ns, "second").Spec.ClaimRef).To(BeNil(), "no second target is claimed")
	// The target it holds still names it, and stays Bound.
	g.Expect(getTarget(g, ns, "first").Spec.ClaimRef).To(Equal(&appstudiov1alpha1.DeploymentTargetClaimReference{Name: "c"}))
	eventuallyTarget(t, ns, "first", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}})
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	g.Expect(getTarget(g, ns, "second").DeletionTimestamp).To(BeNil(), "the target the claim never held is left alone")
}

// TestStaticBindingByClaimRef: a target created with claimRef naming a claim
// that does not exist yet is reserved (Pending); the claim, once created, binds
// to it and to nothing else.
func TestStaticBindingByClaimRef(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newTarget(ns, "free", class.Name, ""), newTarget(ns, "reserved", class.Name, "c"))
	dt := eventuallyTarget(t, ns, "reserved", appstudiov1alpha1.DeploymentTargetPhasePending, "c")
	g.Expect(boundReason(dt.Status.Conditions)).To(Equal(appstudiov1alpha1.TargetReasonClaimNotFound))

	create(t, newClaim(ns, "c", class.Name, ""))
	claim := eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
	g.Expect(claim.Annotations).NotTo(HaveKey(appstudiov1alpha1.ProvisionerAnnotation))
	eventuallyTarget(t, ns, "reserved", appstudiov1alpha1.DeploymentTargetPhaseBound, "c")
	eventuallyTarget(t, ns, "free", appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
}

// TestBestMatchDeterministic: a claim without targetName gets the best free
// target of its class — never one of another class, claimed by someone else,
// Released — and best means oldest first, then by name. Three claims in a row
// take the free targets in exactly that order.
func TestBestMatchDeterministic(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	other := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t,
		newTarget(ns, "z-other-class", other.Name, ""),
		newTarget(ns, "a-claimed", class.Name, "someone-else"),
		newTarget(ns, "d", class.Name, ""),
		newTarget(ns, "b", class.Name, ""),
		newTarget(ns, "c", class.Name, ""),
	)
	for _, n := range []string{"b", "c", "d"} {
		eventuallyTarget(t, ns, n, appstudiov1alpha1.DeploymentTargetPhaseAvailable, "")
	}

	// The expected order, computed from the server's own timestamps.
	var list appstudiov1alpha1.DeploymentTargetList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var free []appstudiov1alpha1.DeploymentTarget
	for _, dt := range list.Items {
		if dt.Spec.DeploymentTargetClassName == class.Name && dt.Spec.ClaimRef == nil {
			free = append(free, dt)
		}
	}
	slices.SortFunc(free, func(a, b appstudiov1alpha1.DeploymentTarget) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	g.Expect(free).To(HaveLen(3))

	for i, want := range free {
		name := "claim-" + string(rune('1'+i))
		create(t, newClaim(ns, name, class.Name, ""))
		claim := eventuallyClaim(t, ns, name, appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
		g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.BoundByControllerAnnotation, "true"))
		g.Expect(claim.Spec.TargetName).To(Equal(want.Name))
		eventuallyTarget(t, ns, want.Name, appstudiov1alpha1.DeploymentTargetPhaseBound, name)
	}
	g.Expect(claimRefName(getTarget(g, ns, "z-other-class"))).To(BeEmpty())
	g.Expect(claimRefName(getTarget(g, ns, "a-claimed"))).To(Equal("someone-else"))

	// Nothing free is left: the next claim is marked for provisioning.
	create(t, newClaim(ns, "claim-4", class.Name, ""))
	claim := eventuallyClaim(t, ns, "claim-4", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))
}

// TestRace50ClaimsFor10Targets: 50 claims created at once race for 10 free
// targets, reconciled 8 at a time. Exactly 10 claims end Bound, each to its own
// target; no target is bound twice and no claim holds two targets; the other 40
// are marked for provisioning. Repeated in several rounds.
func TestRace50ClaimsFor10Targets(t *testing.T) {
	const rounds, nTargets, nClaims = 3, 10, 50
	for round := range rounds {
		t.Run("round-"+string(rune('1'+round)), func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
			startBinder(t, binder.Options{MaxConcurrentReconciles: 8}, ns)
			for i := range nTargets {
				create(t, newTarget(ns, "t"+itoa(i), class.Name, ""))
			}
			claims := make([]client.Object, nClaims)
			for i := range nClaims {
				claims[i] = newClaim(ns, "c"+itoa(i), class.Name, "")
			}
			createConcurrently(t, nClaims, claims...)

			check := func(g Gomega) {
				var claims appstudiov1alpha1.DeploymentTargetClaimList
				g.Expect(env.Client.List(context.Background(), &claims, client.InNamespace(ns))).To(Succeed())
				var targets appstudiov1alpha1.DeploymentTargetList
				g.Expect(env.Client.List(context.Background(), &targets, client.InNamespace(ns))).To(Succeed())

				bound, provisioning := map[string]bool{}, 0
				for _, c := range claims.Items {
					switch {
					case c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound:
						bound[c.Name] = true
					case boundReason(c.Status.Conditions) == appstudiov1alpha1.BindReasonProvisioning:
						provisioning++
					}
				}
				g.Expect(bound).To(HaveLen(nTargets), "bound claims")
				g.Expect(provisioning).To(Equal(nClaims-nTargets), "claims marked for provisioning")
				holders := map[string]string{}
				for _, dt := range targets.Items {
					g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound), "target %s", dt.Name)
					ref := claimRefName(&dt)
					g.Expect(bound).To(HaveKey(ref), "target %s names claim %q", dt.Name, ref)
					g.Expect(holders).NotTo(HaveKey(ref), "claim %s holds targets %s and %s", ref, holders[ref], dt.Name)
					holders[ref] = dt.Name
				}
			}
			g.Eventually(check).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
			g.Consistently(check).WithTimeout(consistency).WithPolling(200 * time.Millisecond).Should(Succeed())
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// bindDynamically creates a claim and plays the provisioner: a target with
// claimRef to the claim and the provisioner's finalizer. It returns when both
// are Bound.
func bindDynamically(t *testing.T, ns, class, claimName, targetName string) {
	t.Helper()
	create(t, newClaim(ns, claimName, class, ""))
	eventuallyClaim(t, ns, claimName, appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	dt := newTarget(ns, targetName, class, claimName, appstudiov1alpha1.TargetFinalizer)
	dt.Annotations = map[string]string{appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner}
	create(t, dt)
	eventuallyTarget(t, ns, targetName, appstudiov1alpha1.DeploymentTargetPhaseBound, claimName)
	eventuallyClaim(t, ns, claimName, appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)
}

// TestDeleteWithReclaimPolicyDelete: deleting the claim deletes its target
// (step 2); the claim waits, with a reason, until the target is gone (its
// provisioner finalizer removed, steps 3-6), then goes itself (step 7).
func TestDeleteWithReclaimPolicyDelete(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)
	bindDynamically(t, ns, class.Name, "c", "dt")

	g.Expect(env.Client.Delete(context.Background(), getClaim(g, ns, "c"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getTarget(g, ns, "dt").DeletionTimestamp).NotTo(BeNil())
		claim := getClaim(g, ns, "c")
		g.Expect(boundReason(claim.Status.Conditions)).To(Equal(appstudiov1alpha1.BindReasonDeletingTarget))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func(g Gomega) { getClaim(g, ns, "c") }).WithTimeout(time.Second).Should(Succeed(), "the claim waits for its target")

	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dt"}})
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
}

// TestDeleteWithReclaimPolicyRetain: deleting the claim keeps the target,
// clears its claimRef (rule C), and the target reports Released (rule A).
func TestDeleteWithReclaimPolicyRetain(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyRetain)
	startBinder(t, binder.Options{}, ns)
	bindDynamically(t, ns, class.Name, "c", "dt")

	g.Expect(env.Client.Delete(context.Background(), getClaim(g, ns, "c"))).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	dt := eventuallyTarget(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
	g.Expect(dt.DeletionTimestamp).To(BeNil())
	g.Expect(boundReason(dt.Status.Conditions)).To(Equal(appstudiov1alpha1.TargetReasonReleased))

	// A Released target is not handed to the next claim.
	create(t, newClaim(ns, "next", class.Name, ""))
	eventuallyClaim(t, ns, "next", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Consistently(func(g Gomega) {
		dt := getTarget(g, ns, "dt")
		g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
		g.Expect(dt.Spec.ClaimRef).To(BeNil())
	}).WithTimeout(time.Second).Should(Succeed())
}

// TestTargetDeletedWhileBound: deleting a bound target leaves its claim Lost
// (rule B), and the claim is not deleted.
func TestTargetDeletedWhileBound(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)
	bindDynamically(t, ns, class.Name, "c", "dt")

	g.Expect(env.Client.Delete(context.Background(), getTarget(g, ns, "dt"))).To(Succeed())
	eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseLost, appstudiov1alpha1.BindReasonTargetLost)
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dt"}})
	g.Consistently(func(g Gomega) {
		c := getClaim(g, ns, "c")
		g.Expect(c.DeletionTimestamp).To(BeNil())
		g.Expect(c.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseLost))
	}).WithTimeout(consistency).Should(Succeed())
}

// TestUnableToTerminateFails: a deleting target whose SpaceRequest reports
// UnableToTerminate for longer than the timeout (shortened here) turns Failed
// and keeps its finalizer; when the SpaceRequest finally goes, deletion
// completes.
//
// The binder finds the SpaceRequest by the provisioner's spacerequest
// annotation on the target, or else by the claim label on the SpaceRequest.
func TestUnableToTerminateFails(t *testing.T) {
	t.Run("by-claim-label", func(t *testing.T) { testUnableToTerminate(t, false) })
	t.Run("by-spacerequest-annotation", func(t *testing.T) { testUnableToTerminate(t, true) })
}

func testUnableToTerminate(t *testing.T, byAnnotation bool) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{UnableToTerminateTimeout: 2 * time.Second}, ns)
	bindDynamically(t, ns, class.Name, "c", "dt")

	sr := &toolchainv1alpha1.SpaceRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "c-sr",
			Finalizers: []string{toolchainv1alpha1.Finalizer},
		},
		Spec: toolchainv1alpha1.SpaceRequestSpec{TierName: "appstudio-env"},
	}
	if byAnnotation {
		dt := getTarget(g, ns, "dt")
		dt.Annotations[appstudiov1alpha1.SpaceRequestAnnotation] = sr.Name
		g.Expect(env.Client.Update(ctx, dt)).To(Succeed())
	} else {
		sr.Labels = map[string]string{appstudiov1alpha1.ClaimLabel: "c"}
	}
	create(t, sr)
	// The provisioner deletes the SpaceRequest when the target is deleted.
	g.Expect(env.Client.Delete(ctx, getTarget(g, ns, "dt"))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, sr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		dt := getTarget(g, ns, "dt")
		g.Expect(dt.Status.Conditions).To(ContainElement(And(
			HaveField("Type", appstudiov1alpha1.ConditionTerminating),
			HaveField("Reason", appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest))))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The SpaceRequest controller, by hand: UnableToTerminate from now on.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	sr.Status.Conditions = []metav1.Condition{{
		Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: toolchainv1alpha1.ReasonUnableToTerminate, Message: "space could not be deleted",
		LastTransitionTime: metav1.Now(),
	}}
	g.Expect(env.Client.Status().Update(ctx, sr)).To(Succeed())

	g.Eventually(func(g Gomega) {
		dt := getTarget(g, ns, "dt")
		g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseFailed))
		g.Expect(dt.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))
		g.Expect(dt.Status.Conditions).To(ContainElement(And(
			HaveField("Type", appstudiov1alpha1.ConditionTerminating),
			HaveField("Reason", appstudiov1alpha1.TerminatingReasonUnableToTerminate))))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	eventuallyClaim(t, ns, "c", appstudiov1alpha1.DeploymentTargetClaimPhaseLost, appstudiov1alpha1.BindReasonTargetLost)

	// The SpaceRequest finally goes; the target reports it, and the
	// provisioner (by hand) completes the deletion.
	removeFinalizer(t, sr, toolchainv1alpha1.Finalizer)
	eventuallyGone(t, sr)
	g.Eventually(func(g Gomega) {
		dt := getTarget(g, ns, "dt")
		g.Expect(dt.Status.Conditions).To(ContainElement(And(
			HaveField("Type", appstudiov1alpha1.ConditionTerminating),
			HaveField("Reason", appstudiov1alpha1.TerminatingReasonSpaceRequestGone))))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	removeFinalizer(t, getTarget(g, ns, "dt"), appstudiov1alpha1.TargetFinalizer)
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dt"}})
}

// TestMissingClass: a claim whose class does not exist says so and is still
// deleted; a bound claim whose class was deleted meanwhile is deleted too and
// keeps (releases) its target rather than deleting it without a policy.
func TestMissingClass(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t, newClaim(ns, "orphan", "no-such-class", ""))
	eventuallyClaim(t, ns, "orphan", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonClassNotFound)
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "orphan"))).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}})

	bindDynamically(t, ns, class.Name, "c", "dt")
	g.Expect(env.Client.Delete(ctx, class)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, getClaim(g, ns, "c"))).To(Succeed())
	eventuallyGone(t, &appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	dt := eventuallyTarget(t, ns, "dt", appstudiov1alpha1.DeploymentTargetPhaseReleased, "")
	g.Expect(dt.DeletionTimestamp).To(BeNil())
}

// TestRefusedBindings: a claim naming a target of another class, or a target
// claimed by another claim, is never bound to it and says why; the target is
// left alone.
func TestRefusedBindings(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	class := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	other := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns)

	create(t,
		newTarget(ns, "foreign", other.Name, ""),
		newTarget(ns, "taken", class.Name, "owner"),
		newClaim(ns, "owner", class.Name, ""),
	)
	eventuallyClaim(t, ns, "owner", appstudiov1alpha1.DeploymentTargetClaimPhaseBound, appstudiov1alpha1.BindReasonBound)

	create(t, newClaim(ns, "wants-foreign", class.Name, "foreign"), newClaim(ns, "wants-taken", class.Name, "taken"))
	c := eventuallyClaim(t, ns, "wants-foreign", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonClassMismatch)
	g.Expect(c.Status.Conditions[0].Message).To(ContainSubstring("foreign"))
	eventuallyClaim(t, ns, "wants-taken", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonTargetClaimedByOther)

	// A target naming a claim of another class is not bound either.
	create(t, newTarget(ns, "mismatch", other.Name, "wants-mine"), newClaim(ns, "wants-mine", class.Name, ""))
	eventuallyClaim(t, ns, "wants-mine", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonClassMismatch)

	g.Consistently(func(g Gomega) {
		g.Expect(claimRefName(getTarget(g, ns, "foreign"))).To(BeEmpty())
		g.Expect(claimRefName(getTarget(g, ns, "taken"))).To(Equal("owner"))
		g.Expect(getTarget(g, ns, "mismatch").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhasePending))
		g.Expect(getClaim(g, ns, "wants-taken").Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhasePending))
	}).WithTimeout(consistency).Should(Succeed())
}
