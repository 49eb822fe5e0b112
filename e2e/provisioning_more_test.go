package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

const provisionWait, provisionPoll = 90 * time.Second, 200 * time.Millisecond

// sandboxClass creates a cluster-wide class of the sandbox provisioner.
func sandboxClass(g Gomega, c client.Client, name string, policy appstudiov1alpha1.ReclaimPolicy) {
	g.Expect(c.Create(context.Background(), &appstudiov1alpha1.DeploymentTargetClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
			Provisioner:   appstudiov1alpha1.SandboxProvisioner,
			ReclaimPolicy: policy,
		},
	})).To(Succeed())
}

func newClaim(ns, name, class string) *appstudiov1alpha1.DeploymentTargetClaim {
	return &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: class},
	}
}

// provisioned is what dynamic provisioning made for one claim.
type provisioned struct {
	target       appstudiov1alpha1.DeploymentTarget
	spaceRequest toolchainv1alpha1.SpaceRequest
	namespace    string // the namespace provisioned for the target
	secret       string // the credentials Secret, in the claim's namespace
}

// provisionClaim creates a claim of class and waits until the three
// controllers have bound it to a dynamically provisioned target.
func provisionClaim(g Gomega, c client.Client, ns, name, class string) provisioned {
	ctx := context.Background()
	g.Expect(c.Create(ctx, newClaim(ns, name, class))).To(Succeed())

	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetClaimPhase {
		claim := &appstudiov1alpha1.DeploymentTargetClaim{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim)).To(Succeed())
		return claim.Status.Phase
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound))

	var p provisioned
	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetPhase {
		l := &appstudiov1alpha1.DeploymentTargetList{}
		g.Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		var mine []appstudiov1alpha1.DeploymentTarget
		for _, dt := range l.Items {
			if dt.Spec.ClaimRef != nil && dt.Spec.ClaimRef.Name == name {
				mine = append(mine, dt)
			}
		}
		g.Expect(mine).To(HaveLen(1))
		p.target = mine[0]
		return p.target.Status.Phase
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
	g.Expect(p.target.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))

	srs := &toolchainv1alpha1.SpaceRequestList{}
	g.Expect(c.List(ctx, srs, client.InNamespace(ns), client.MatchingLabels{appstudiov1alpha1.ClaimLabel: name})).To(Succeed())
	g.Expect(srs.Items).To(HaveLen(1))
	p.spaceRequest = srs.Items[0]
	g.Expect(meta.IsStatusConditionTrue(p.spaceRequest.Status.Conditions, toolchainv1alpha1.ConditionReady)).To(BeTrue())
	g.Expect(p.spaceRequest.Status.NamespaceAccess).To(HaveLen(1))
	p.namespace = p.spaceRequest.Status.NamespaceAccess[0].Name
	p.secret = p.spaceRequest.Status.NamespaceAccess[0].SecretRef
	g.Expect(p.target.Spec.KubernetesClusterCredentials.DefaultNamespace).To(Equal(p.namespace))
	g.Expect(p.target.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret).To(Equal(p.secret))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: p.namespace}, &corev1.Namespace{})).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.secret}, &corev1.Secret{})).To(Succeed())
	return p
}

// existsNotDeleting fails unless obj exists without a deletion timestamp.
func existsNotDeleting(g Gomega, c client.Client, obj client.Object) {
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	g.Expect(obj.GetDeletionTimestamp()).To(BeNil(), "%T %s is being deleted", obj, obj.GetName())
}

// TestDeleteClaimWithReclaimPolicyRetain: with the three processes running,
// deleting a dynamically provisioned claim of a Retain class removes the claim
// only; the target stays, Released, its claimRef cleared, and the SpaceRequest,
// the namespace and the credentials Secret are kept (seed 004 step 2, rules A, C).
func TestDeleteClaimWithReclaimPolicyRetain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := startProvisioning(t).Client
	const ns, class, name = "default", "sandbox-retain", "retained-dtc"
	sandboxClass(g, c, class, appstudiov1alpha1.ReclaimPolicyRetain)
	p := provisionClaim(g, c, ns, name, class)

	g.Expect(c.Delete(ctx, newClaim(ns, name, class))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appstudiov1alpha1.DeploymentTargetClaim{}))
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(BeTrue(), "the claim is gone")

	dt := &appstudiov1alpha1.DeploymentTarget{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&p.target), dt)).To(Succeed())
		g.Expect(dt.Spec.ClaimRef).To(BeNil())
		g.Expect(dt.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(Succeed(), "the target is Released, claimRef cleared")

	// Nothing else is deleted, and stays so while the controllers react to
	// the release (the orphan reconciler must keep a Retain SpaceRequest).
	kept := []client.Object{
		&appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.target.Name}},
		&toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.spaceRequest.Name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.secret}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}},
	}
	g.Consistently(func(g Gomega) {
		for _, obj := range kept {
			existsNotDeleting(g, c, obj)
		}
	}).WithTimeout(3 * time.Second).WithPolling(provisionPoll).Should(Succeed())
	sr := kept[1].(*toolchainv1alpha1.SpaceRequest)
	g.Expect(meta.IsStatusConditionTrue(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)).To(BeTrue(), "the SpaceRequest is still Ready")
	g.Expect(dt.Spec.KubernetesClusterCredentials.DefaultNamespace).To(Equal(p.namespace))
}

// TestDeleteBoundTarget: with the three processes running, deleting a bound,
// dynamically provisioned target completes (its SpaceRequest is deleted
// first), and its claim turns Lost and is not deleted (seed 004 rule B).
func TestDeleteBoundTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startProvisioning(t)
	c := env.Client
	const ns, class, name = "default", "sandbox-delete", "lost-dtc"
	sandboxClass(g, c, class, appstudiov1alpha1.ReclaimPolicyDelete)
	p := provisionClaim(g, c, ns, name, class)

	g.Expect(c.Delete(ctx, &p.target)).To(Succeed())

	// The provisioner deletes the SpaceRequest, the stub its namespace.
	g.Eventually(func(g Gomega) {
		n := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: p.namespace}, n)).To(Succeed())
		g.Expect(n.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(Succeed(), "the namespace is being deleted")
	// No namespace controller here: finish the namespace's deletion as it would.
	finalizeNamespace(t, env, p.namespace)

	for _, obj := range []client.Object{
		&toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.spaceRequest.Name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.secret}},
		&appstudiov1alpha1.DeploymentTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.target.Name}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}},
	} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(BeTrue(), "%T %s is gone", obj, obj.GetName())
	}

	claim := newClaim(ns, name, class)
	g.Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetClaimPhase {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		return claim.Status.Phase
	}).WithTimeout(provisionWait).WithPolling(provisionPoll).Should(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseLost))
	// Lost is final: the claim is neither deleted nor provisioned again.
	g.Consistently(func(g Gomega) {
		existsNotDeleting(g, c, claim)
		g.Expect(claim.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseLost))
		srs := &toolchainv1alpha1.SpaceRequestList{}
		g.Expect(c.List(ctx, srs, client.InNamespace(ns))).To(Succeed())
		g.Expect(srs.Items).To(BeEmpty())
		dts := &appstudiov1alpha1.DeploymentTargetList{}
		g.Expect(c.List(ctx, dts, client.InNamespace(ns))).To(Succeed())
		g.Expect(dts.Items).To(BeEmpty())
	}).WithTimeout(3 * time.Second).WithPolling(provisionPoll).Should(Succeed())
}

// BenchmarkDynamicProvisioning100Claims: with the three processes running,
// creates 100 claims of a sandbox class at once (each iteration in a new
// namespace) and times them until all are Bound, i.e. 100 SpaceRequests,
// namespaces, credentials and targets provisioned and bound.
func BenchmarkDynamicProvisioning100Claims(b *testing.B) {
	const claims, creators = 100, 16
	g := NewWithT(b)
	ctx := context.Background()
	c := startProvisioning(b).Client
	const class = "sandbox-bench"
	sandboxClass(g, c, class, appstudiov1alpha1.ReclaimPolicyDelete)

	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("bench-%d", i)
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		b.StartTimer()
		start := time.Now()

		// At once: 16 concurrent creators, as many clients would.
		names := make(chan string, claims)
		for j := range claims {
			names <- fmt.Sprintf("claim-%03d", j)
		}
		close(names)
		errs := make(chan error, claims)
		var wg sync.WaitGroup
		for range creators {
			wg.Go(func() {
				for name := range names {
					errs <- c.Create(ctx, newClaim(ns, name, class))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			g.Expect(err).NotTo(HaveOccurred())
		}

		g.Eventually(func(g Gomega) int {
			l := &appstudiov1alpha1.DeploymentTargetClaimList{}
			g.Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
			bound := 0
			for _, claim := range l.Items {
				if claim.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
					bound++
				}
			}
			return bound
		}).WithTimeout(5*time.Minute).WithPolling(250*time.Millisecond).Should(Equal(claims), "all claims Bound")
		total += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(claims*b.N)/total.Seconds(), "claims/s")
}
