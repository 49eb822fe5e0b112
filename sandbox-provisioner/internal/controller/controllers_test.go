package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/orphan"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/target"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	apiURL   = "https://sandbox.example.com:6443"
	// stubFinalizer stands in for the SpaceRequest controller's finalizer.
	stubFinalizer = toolchainv1alpha1.Finalizer
)

var seq atomic.Int32

// unique makes names unique per test run, so that -count=N works against the
// one API server of the package.
func unique(base string) string {
	return fmt.Sprintf("%s-%d", base, seq.Add(1))
}

func createClass(t *testing.T, name string, policy appstudiov1alpha1.ReclaimPolicy, params string) {
	t.Helper()
	class := &appstudiov1alpha1.DeploymentTargetClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
			Provisioner:   appstudiov1alpha1.SandboxProvisioner,
			ReclaimPolicy: policy,
		},
	}
	if params != "" {
		class.Spec.Parameters = &runtime.RawExtension{Raw: []byte(params)}
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), class)).To(Succeed())
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// createClaim creates a claim annotated as the binder would for provisioner
// (empty: not annotated).
func createClaim(t *testing.T, ns, name, class, provisioner string) *appstudiov1alpha1.DeploymentTargetClaim {
	t.Helper()
	claim := &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: class},
	}
	if provisioner != "" {
		claim.Annotations = map[string]string{appstudiov1alpha1.ProvisionerAnnotation: provisioner}
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), claim)).To(Succeed())
	return claim
}

// spaceRequestsOf lists the SpaceRequests labelled with the claim.
func spaceRequestsOf(g Gomega, claim *appstudiov1alpha1.DeploymentTargetClaim) []toolchainv1alpha1.SpaceRequest {
	l := &toolchainv1alpha1.SpaceRequestList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(claim.Namespace),
		client.MatchingLabels{appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(claim.Name)})).To(Succeed())
	return l.Items
}

func waitForOneSpaceRequest(t *testing.T, claim *appstudiov1alpha1.DeploymentTargetClaim) *toolchainv1alpha1.SpaceRequest {
	t.Helper()
	var sr *toolchainv1alpha1.SpaceRequest
	NewWithT(t).Eventually(func(g Gomega) {
		items := spaceRequestsOf(g, claim)
		g.Expect(items).To(HaveLen(1))
		sr = &items[0]
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return sr
}

// playStub does what the spacerequest-stub would: finalizer, a kubeconfig
// Secret, and a Ready status.
func playStub(t *testing.T, sr *toolchainv1alpha1.SpaceRequest) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur); err != nil {
			return err
		}
		controllerutil.AddFinalizer(cur, stubFinalizer)
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sr.Namespace, Name: sr.Name + "-kubeconfig"},
		Data:       map[string][]byte{toolchainv1alpha1.AdminKubeconfigKey: []byte("apiVersion: v1\nkind: Config\n")},
	}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	g.Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur); err != nil {
			return err
		}
		cur.Status.TargetClusterURL = apiURL
		cur.Status.NamespaceAccess = []toolchainv1alpha1.NamespaceAccess{{Name: sr.Namespace + "-" + sr.Name, SecretRef: secret.Name}}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: toolchainv1alpha1.ReasonProvisioned, ObservedGeneration: cur.Generation,
		})
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// releaseSpaceRequest removes the stub's finalizer, as the stub does once the
// namespace is gone.
func releaseSpaceRequest(t *testing.T, key client.ObjectKey) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(context.Background(), key, cur); err != nil {
			return err
		}
		controllerutil.RemoveFinalizer(cur, stubFinalizer)
		return env.Client.Update(context.Background(), cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

func waitForTarget(t *testing.T, claim *appstudiov1alpha1.DeploymentTargetClaim) *appstudiov1alpha1.DeploymentTarget {
	t.Helper()
	dt := &appstudiov1alpha1.DeploymentTarget{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: claim.Namespace, Name: sandbox.ObjectName(claim)}, dt)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return dt
}

// eventReasons lists the reasons of the events about the object named name.
func eventReasons(ns, name string) func(g Gomega) []string {
	return func(g Gomega) []string { return observabilitytest.EventReasons(g, env.Client, ns, name) }
}

// bindAndDeleteTarget plays the binder, marking the claim bound (so nothing
// more is provisioned for it; the binder would mark it Lost once the target
// is deleted), then deletes the target and waits until that deletes the
// target's SpaceRequest.
func bindAndDeleteTarget(t *testing.T, claim *appstudiov1alpha1.DeploymentTargetClaim, dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	base := claim.DeepCopy()
	claim.Annotations[appstudiov1alpha1.BindCompleteAnnotation] = appstudiov1alpha1.AnnotationTrue
	g.Expect(env.Client.Patch(ctx, claim, client.MergeFrom(base))).To(Succeed())

	g.Expect(env.Client.Delete(ctx, dt)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &toolchainv1alpha1.SpaceRequest{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur)).To(Succeed())
		g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the SpaceRequest is being deleted")
}

func gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

// TestExactlyOneSpaceRequestThenTarget: claims marked for the sandbox get
// exactly one SpaceRequest each, even with two provisioner processes racing
// (several workers each) and a restart, and the target appears with the
// right fields once the SpaceRequest is Ready.
func TestExactlyOneSpaceRequestThenTarget(t *testing.T) {
	g := NewWithT(t)
	n := unique("one-sr")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)

	stopA := startManager(t, 4)
	stopB := startManager(t, 4)
	const count = 10
	claims := make([]*appstudiov1alpha1.DeploymentTargetClaim, count)
	for i := range count {
		claims[i] = createClaim(t, n, fmt.Sprintf("claim-%d", i), n, appstudiov1alpha1.SandboxProvisioner)
	}
	srs := make([]*toolchainv1alpha1.SpaceRequest, count)
	for i, c := range claims {
		srs[i] = waitForOneSpaceRequest(t, c)
		sr := srs[i]
		g.Expect(sr.Name).To(Equal(sandbox.ObjectName(c)))
		g.Expect(sr.Labels).To(HaveKeyWithValue(appstudiov1alpha1.ClaimLabel, c.Name))
		g.Expect(sr.Labels).To(HaveKeyWithValue(appstudiov1alpha1.ClassLabel, n))
		g.Expect(sr.Spec.TierName).To(Equal("appstudio-env"))
		g.Expect(sr.OwnerReferences).To(BeEmpty(), "no owner reference: Retain must keep it")
		g.Expect(sr.ManagedFields).To(ContainElement(HaveField("Manager", sandbox.FieldManager)))
	}

	// Restart: the old processes stop, a new one takes over.
	stopA()
	stopB()
	startManager(t, 4)
	for _, sr := range srs {
		playStub(t, sr)
	}
	for i, c := range claims {
		dt := waitForTarget(t, c)
		g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))
		g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.SpaceRequestAnnotation, srs[i].Name))
		g.Expect(dt.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ClaimAnnotation, c.Name+"/"+string(c.UID)),
			"the claim object, for the binder: a claim created again under the name does not inherit the target")
		g.Expect(dt.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))
		g.Expect(dt.Spec.DeploymentTargetClassName).To(Equal(n))
		g.Expect(dt.Spec.ClaimRef).To(Equal(&appstudiov1alpha1.DeploymentTargetClaimReference{Name: c.Name}))
		g.Expect(dt.Spec.KubernetesClusterCredentials).To(Equal(appstudiov1alpha1.DeploymentTargetKubernetesClusterCredentials{
			DefaultNamespace:         n + "-" + srs[i].Name,
			APIURL:                   apiURL,
			ClusterCredentialsSecret: srs[i].Name + "-kubeconfig",
		}))
		g.Expect(dt.Status).To(BeZero(), "the provisioner never writes target status")
		g.Expect(dt.OwnerReferences).To(BeEmpty())
	}
	// Still exactly one of each per claim.
	l := &toolchainv1alpha1.SpaceRequestList{}
	g.Expect(env.Client.List(ctx, l, client.InNamespace(n))).To(Succeed())
	g.Expect(l.Items).To(HaveLen(count))
	dts := &appstudiov1alpha1.DeploymentTargetList{}
	g.Expect(env.Client.List(ctx, dts, client.InNamespace(n))).To(Succeed())
	g.Expect(dts.Items).To(HaveLen(count))
}

// TestLongClaimAndClassNames: names longer than a label value (63
// characters) are provisioned like any other: the SpaceRequest's labels hold
// shortened values, its annotations the full names, and every controller
// finds the claim by its full name (the orphan reconciler keeps the
// SpaceRequest of a claim that exists; the target names the claim).
func TestLongClaimAndClassNames(t *testing.T) {
	g := NewWithT(t)
	n := unique("long")
	class := n + "-" + strings.Repeat("c", 70)
	createClass(t, class, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)

	claim := createClaim(t, n, strings.Repeat("a", 70)+"-claim", class, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	for key, full := range map[string]string{appstudiov1alpha1.ClaimLabel: claim.Name, appstudiov1alpha1.ClassLabel: class} {
		g.Expect(validation.IsValidLabelValue(sr.Labels[key])).To(BeEmpty(), key)
		g.Expect(sr.Labels[key]).NotTo(Equal(full), "shortened")
		g.Expect(sr.Annotations).To(HaveKeyWithValue(key, full))
	}
	playStub(t, sr)
	dt := waitForTarget(t, claim)
	g.Expect(dt.Spec.ClaimRef).To(Equal(&appstudiov1alpha1.DeploymentTargetClaimReference{Name: claim.Name}))
	g.Expect(dt.Spec.DeploymentTargetClassName).To(Equal(class))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(sr), sr)).To(Succeed())
	g.Expect(sr.DeletionTimestamp).To(BeNil(), "the orphan reconciler found the claim")
}

// TestTargetDeletionDeletesSpaceRequestFirst: deleting a provisioned target
// deletes its SpaceRequest; the target keeps its finalizer until the
// SpaceRequest is really gone.
func TestTargetDeletionDeletesSpaceRequestFirst(t *testing.T) {
	g := NewWithT(t)
	n := unique("del-dt")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	startManager(t, 2)
	claim := createClaim(t, n, "c", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	playStub(t, sr)
	dt := waitForTarget(t, claim)
	bindAndDeleteTarget(t, claim, dt, sr)
	// The stub's finalizer holds the SpaceRequest, so the target stays.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), dt)).To(Succeed())
	g.Expect(dt.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))

	// The SpaceRequest controller reports it cannot terminate: the target
	// says so and keeps waiting (the binder marks it Failed).
	g.Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur); err != nil {
			return err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: toolchainv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: toolchainv1alpha1.ReasonUnableToTerminate, Message: "namespace still there", ObservedGeneration: cur.Generation,
		})
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(eventReasons(n, dt.Name)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(target.EventSpaceRequestNotTerminate))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), dt)).To(Succeed())
	g.Expect(dt.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer))

	// The SpaceRequest goes; then the target is released.
	releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: sr.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the target is released and gone")
}

// TestOrphanedSpaceRequests: a claim deleted before its target was made
// leaves a SpaceRequest that nothing refers to. It is deleted whatever its
// class says (Delete, Retain, or the class is gone): a reclaimPolicy keeps a
// claim's target, and this SpaceRequest never backed one; kept, it would
// hold a namespace for ever.
func TestOrphanedSpaceRequests(t *testing.T) {
	g := NewWithT(t)
	n := unique("orphans")
	ctx := context.Background()
	createClass(t, n+"-delete", appstudiov1alpha1.ReclaimPolicyDelete, "")
	createClass(t, n+"-retain", appstudiov1alpha1.ReclaimPolicyRetain, "")
	createNamespace(t, n)
	startManager(t, 2)

	del := createClaim(t, n, "del", n+"-delete", appstudiov1alpha1.SandboxProvisioner)
	ret := createClaim(t, n, "ret", n+"-retain", appstudiov1alpha1.SandboxProvisioner)
	noClass := createClaim(t, n, "no-class", n+"-missing", appstudiov1alpha1.SandboxProvisioner)
	// A claim whose class is missing gets no SpaceRequest; give this one a
	// class, let it provision, then delete the class.
	createClass(t, n+"-missing", appstudiov1alpha1.ReclaimPolicyRetain, "")
	srDel := waitForOneSpaceRequest(t, del)
	srRet := waitForOneSpaceRequest(t, ret)
	srNoClass := waitForOneSpaceRequest(t, noClass)
	g.Expect(env.Client.Delete(ctx, &appstudiov1alpha1.DeploymentTargetClass{ObjectMeta: metav1.ObjectMeta{Name: n + "-missing"}})).To(Succeed())

	for _, c := range []*appstudiov1alpha1.DeploymentTargetClaim{del, ret, noClass} {
		g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	}
	g.Eventually(gone(srDel)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "Delete: the orphan is deleted")
	g.Eventually(gone(srNoClass)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "class gone: the orphan is deleted")
	g.Eventually(gone(srRet)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "Retain: the orphan never backed a target; it is deleted")
	g.Eventually(eventReasons(n, srRet.Name)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(orphan.EventOrphanDeleted))
}

// lateTarget creates the target as a provisioner racing the claim's deletion
// made it (before the stub reports the SpaceRequest Ready, so the orphan
// reconciler finds it once the claim goes).
func lateTarget(t *testing.T, claim *appstudiov1alpha1.DeploymentTargetClaim, sr *toolchainv1alpha1.SpaceRequest) *appstudiov1alpha1.DeploymentTarget {
	t.Helper()
	dt := newLateTarget(claim, sr)
	NewWithT(t).Expect(env.Client.Create(context.Background(), dt)).To(Succeed())
	return dt
}

// newLateTarget is lateTarget's object, not created.
func newLateTarget(claim *appstudiov1alpha1.DeploymentTargetClaim, sr *toolchainv1alpha1.SpaceRequest) *appstudiov1alpha1.DeploymentTarget {
	return &appstudiov1alpha1.DeploymentTarget{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: sr.Name, Finalizers: []string{appstudiov1alpha1.TargetFinalizer},
			Annotations: map[string]string{
				appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
				appstudiov1alpha1.SpaceRequestAnnotation:  sr.Name,
			}},
		Spec: appstudiov1alpha1.DeploymentTargetSpec{
			DeploymentTargetClassName: claim.Spec.DeploymentTargetClassName,
			ClaimRef:                  &appstudiov1alpha1.DeploymentTargetClaimReference{Name: claim.Name},
			KubernetesClusterCredentials: appstudiov1alpha1.DeploymentTargetKubernetesClusterCredentials{
				DefaultNamespace: claim.Namespace + "-" + sr.Name, APIURL: apiURL, ClusterCredentialsSecret: sr.Name + "-kubeconfig",
			},
		},
	}
}

// TestTargetMadeForAClaimThatWentIsDeleted: a claim deleted in the moment its
// SpaceRequest turned Ready can still get a target (the provisioner's cache
// showed the claim). That target, never bound, is an orphan: with Delete it
// is deleted, and with it the SpaceRequest; nothing is left for a later claim
// of the same name to inherit.
func TestTargetMadeForAClaimThatWentIsDeleted(t *testing.T) {
	g := NewWithT(t)
	n := unique("late-target")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	claim := createClaim(t, n, "gone", n, appstudiov1alpha1.SandboxProvisioner)
	startManager(t, 2)
	sr := waitForOneSpaceRequest(t, claim)
	dt := lateTarget(t, claim, sr)
	playStub(t, sr)
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())

	// The orphaned target is deleted, and its deletion deletes the
	// SpaceRequest (which the stub, played here, then lets go).
	g.Eventually(func(g Gomega) {
		cur := &toolchainv1alpha1.SpaceRequest{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur)).To(Succeed())
		g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the orphaned target's deletion deletes the SpaceRequest")
	releaseSpaceRequest(t, client.ObjectKeyFromObject(sr))
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: sr.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the orphaned target is gone")
}

// TestTargetMadeAfterItsSpaceRequestWasDeletedIsDeleted: the orphan
// reconciler deletes the SpaceRequest of a claim that went, having confirmed
// with the API server that the claim is gone and no target exists; a
// provisioner whose cache still shows the claim and the SpaceRequest can
// create the target right after (played here). That late target, never bound,
// made from a SpaceRequest being deleted (held by the stub's finalizer) or
// already gone, is deleted when it appears, whatever its class's
// reclaimPolicy (Retain here): the namespace it would point to is going.
// Nothing is left behind: the target's deletion completes once the
// SpaceRequest is gone.
func TestTargetMadeAfterItsSpaceRequestWasDeletedIsDeleted(t *testing.T) {
	g := NewWithT(t)
	n := unique("late-after-orphan")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyRetain, "")
	createNamespace(t, n)
	startManager(t, 2)

	// terminating: the stub's finalizer holds the deleted SpaceRequest;
	// gone: the SpaceRequest is gone before the target appears.
	terminating := createClaim(t, n, "terminating", n, appstudiov1alpha1.SandboxProvisioner)
	goneClaim := createClaim(t, n, "gone", n, appstudiov1alpha1.SandboxProvisioner)
	srTerminating := waitForOneSpaceRequest(t, terminating)
	srGone := waitForOneSpaceRequest(t, goneClaim)
	g.Eventually(func() error {
		cur := &toolchainv1alpha1.SpaceRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(srTerminating), cur); err != nil {
			return err
		}
		controllerutil.AddFinalizer(cur, stubFinalizer)
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	for _, c := range []*appstudiov1alpha1.DeploymentTargetClaim{terminating, goneClaim} {
		g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		cur := &toolchainv1alpha1.SpaceRequest{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(srTerminating), cur)).To(Succeed())
		g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the orphaned SpaceRequest is deleted")
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: srGone.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	// The stale provisioner's targets.
	dtTerminating := lateTarget(t, terminating, srTerminating)
	dtGone := lateTarget(t, goneClaim, srGone)
	g.Eventually(gone(dtGone)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(),
		"the late target of a SpaceRequest that is gone is deleted (its finalizer released at once)")
	g.Eventually(func(g Gomega) {
		cur := &appstudiov1alpha1.DeploymentTarget{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dtTerminating), cur)).To(Succeed())
		g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
		g.Expect(cur.Finalizers).To(ContainElement(appstudiov1alpha1.TargetFinalizer), "kept until the SpaceRequest is gone")
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the late target of a terminating SpaceRequest is deleted")
	g.Eventually(eventReasons(n, dtTerminating.Name)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(orphan.EventOrphanDeleted))
	releaseSpaceRequest(t, client.ObjectKeyFromObject(srTerminating))
	g.Eventually(gone(dtTerminating)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// TestReleasedLateTargetIsDeleted: a late target (above) that a binder
// released before it saw the SpaceRequest going (claimRef cleared: the
// target is Available) is deleted all the same: otherwise the next claim of
// its class could bind a target whose namespace is being deleted.
func TestReleasedLateTargetIsDeleted(t *testing.T) {
	g := NewWithT(t)
	n := unique("late-released")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyRetain, "")
	createNamespace(t, n)
	startManager(t, 2)

	claim := createClaim(t, n, "released", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, claim)
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(gone(&toolchainv1alpha1.SpaceRequest{ObjectMeta: sr.ObjectMeta})).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(),
		"the orphaned SpaceRequest is deleted")

	dt := newLateTarget(claim, sr)
	dt.Spec.ClaimRef = nil // released by a binder
	g.Expect(env.Client.Create(ctx, dt)).To(Succeed())
	g.Eventually(gone(dt)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the released late target is deleted")
	g.Eventually(eventReasons(n, dt.Name)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(orphan.EventOrphanDeleted))
}

// TestOrphanTargetOfMissingClassIsKept: a never-bound target made for a
// claim that went is reclaimed by its class's policy, and a class that no
// longer exists counts as Retain, as in the dt-binder (which keeps a claim's
// target when its class is gone): the target and its SpaceRequest are kept
// and an event says why, instead of being deleted without a policy asking
// for it.
func TestOrphanTargetOfMissingClassIsKept(t *testing.T) {
	g := NewWithT(t)
	n := unique("late-target-no-class")
	ctx := context.Background()
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, "")
	createNamespace(t, n)
	claim := createClaim(t, n, "gone", n, appstudiov1alpha1.SandboxProvisioner)
	startManager(t, 2)
	sr := waitForOneSpaceRequest(t, claim)
	dt := lateTarget(t, claim, sr)
	playStub(t, sr)
	g.Expect(env.Client.Delete(ctx, &appstudiov1alpha1.DeploymentTargetClass{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())

	// The event is written by the very reconcile that would have deleted
	// the target.
	expectOrphanRetained(g, n, sr, dt)
}

// expectOrphanRetained: the orphan reconciler kept the never-bound target dt
// and its SpaceRequest sr (OrphanRetained, never OrphanDeleted).
func expectOrphanRetained(g *WithT, n string, sr *toolchainv1alpha1.SpaceRequest, dt *appstudiov1alpha1.DeploymentTarget) {
	ctx := context.Background()
	g.Eventually(eventReasons(n, sr.Name)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(orphan.EventOrphanRetained))
	g.Expect(eventReasons(n, sr.Name)(g)).NotTo(ContainElement(orphan.EventOrphanDeleted))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dt), dt)).To(Succeed())
	g.Expect(dt.DeletionTimestamp).To(BeNil(), "the target is kept")
	cur := &toolchainv1alpha1.SpaceRequest{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sr), cur)).To(Succeed())
	g.Expect(cur.DeletionTimestamp).To(BeNil(), "the SpaceRequest is kept")
}

// TestOnlySandboxClaimsAreProvisioned: claims for another provisioner, not
// marked at all, or already bound are left alone; class parameters choose
// the tier.
func TestOnlySandboxClaimsAreProvisioned(t *testing.T) {
	g := NewWithT(t)
	n := unique("others")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, `{"tierName":"custom-tier"}`)
	createNamespace(t, n)
	startManager(t, 2)

	other := createClaim(t, n, "other", n, "example.com/other")
	unmarked := createClaim(t, n, "unmarked", n, "")
	bound := &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "bound", Annotations: map[string]string{
			appstudiov1alpha1.ProvisionerAnnotation:  appstudiov1alpha1.SandboxProvisioner,
			appstudiov1alpha1.BindCompleteAnnotation: appstudiov1alpha1.AnnotationTrue,
		}},
		Spec: appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: n},
	}
	g.Expect(env.Client.Create(context.Background(), bound)).To(Succeed())
	// Created last, provisioned: by the time its SpaceRequest exists, the
	// provisioner has seen the others.
	sentinel := createClaim(t, n, "sentinel", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, sentinel)
	g.Expect(sr.Spec.TierName).To(Equal("custom-tier"))

	l := &toolchainv1alpha1.SpaceRequestList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(n))).To(Succeed())
	g.Expect(l.Items).To(HaveLen(1))
	for _, c := range []*appstudiov1alpha1.DeploymentTargetClaim{other, unmarked, bound} {
		g.Expect(spaceRequestsOf(g, c)).To(BeEmpty(), c.Name)
	}
}
