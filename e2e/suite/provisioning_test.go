package suite

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

// provisioned is what dynamic provisioning produced for one claim.
type provisioned struct {
	claim        *appstudiov1alpha1.DeploymentTargetClaim
	target       *appstudiov1alpha1.DeploymentTarget
	spaceRequest *toolchainv1alpha1.SpaceRequest
	namespace    string
}

// waitBound waits for claim ns/name to be Bound to a provisioned target whose
// SpaceRequest is Ready and whose namespace exists, and returns them.
func waitBound(ctx context.Context, ns, name string) provisioned {
	var p provisioned
	p.claim = &appstudiov1alpha1.DeploymentTargetClaim{}
	Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetClaimPhase {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p.claim)).To(Succeed())
		return p.claim.Status.Phase
	}).WithContext(ctx).Should(Equal(appstudiov1alpha1.DeploymentTargetClaimPhaseBound), "claim %s/%s Bound", ns, name)

	// The claim's target is the one whose claimRef names it.
	p.target = &appstudiov1alpha1.DeploymentTarget{}
	Eventually(func(g Gomega) appstudiov1alpha1.DeploymentTargetPhase {
		targets := &appstudiov1alpha1.DeploymentTargetList{}
		g.Expect(env.Client.List(ctx, targets, client.InNamespace(ns))).To(Succeed())
		var mine []appstudiov1alpha1.DeploymentTarget
		for _, t := range targets.Items {
			if t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == name {
				mine = append(mine, t)
			}
		}
		g.Expect(mine).To(HaveLen(1), "one target bound to claim %s", name)
		*p.target = mine[0]
		return p.target.Status.Phase
	}).WithContext(ctx).Should(Equal(appstudiov1alpha1.DeploymentTargetPhaseBound))
	Expect(p.target.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionedByAnnotation, appstudiov1alpha1.SandboxProvisioner))
	Expect(p.target.Spec.ClaimRef).NotTo(BeNil())
	Expect(p.target.Spec.ClaimRef.Name).To(Equal(name))

	srs := &toolchainv1alpha1.SpaceRequestList{}
	Expect(env.Client.List(ctx, srs, client.InNamespace(ns), client.MatchingLabels{appstudiov1alpha1.ClaimLabel: name})).To(Succeed())
	Expect(srs.Items).To(HaveLen(1), "one SpaceRequest for the claim")
	p.spaceRequest = &srs.Items[0]
	Expect(meta.IsStatusConditionTrue(p.spaceRequest.Status.Conditions, toolchainv1alpha1.ConditionReady)).To(BeTrue())
	Expect(p.spaceRequest.Status.NamespaceAccess).To(HaveLen(1))
	p.namespace = p.spaceRequest.Status.NamespaceAccess[0].Name
	Expect(p.target.Spec.KubernetesClusterCredentials.DefaultNamespace).To(Equal(p.namespace))
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: p.namespace}, &corev1.Namespace{})).To(Succeed())
	return p
}

var _ = Describe("Environment provisioning (seed 004)", func() {
	It("provisions the seed's claim dynamically to Bound, and deletes everything with it (reclaimPolicy Delete)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "seed-004")
		// `kubectl apply -f` of the seed's YAML, unchanged.
		applyFile(ctx, "", "examples/seeds/004-step0-deploymenttargetclass.yaml")
		applyFile(ctx, ns, "examples/seeds/004-step1-deploymenttargetclaim.yaml")
		applyFile(ctx, ns, "examples/seeds/004-step2-environment.yaml")

		p := waitBound(ctx, ns, "staging-dtc")
		Expect(p.target.Spec.DeploymentTargetClassName).To(Equal("isolation-level-namespace"))
		Expect(p.claim.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))

		By("deleting the claim: the target, the SpaceRequest, its Secret and the namespace go with it")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.target.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret}}
		Expect(env.Client.Delete(ctx, p.claim)).To(Succeed())
		for _, obj := range []client.Object{
			p.claim, p.target, p.spaceRequest, secret,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}},
		} {
			Eventually(env.isGone).WithContext(ctx).WithArguments(obj).Should(BeTrue(), "%T %s is gone", obj, obj.GetName())
		}
	})

	It("keeps the target Released and the namespace when the class says Retain", func(ctx SpecContext) {
		ns := newNamespace(ctx, "retain")
		class := &appstudiov1alpha1.DeploymentTargetClass{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-retain-" + ns},
			Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
				Provisioner:   appstudiov1alpha1.SandboxProvisioner,
				ReclaimPolicy: appstudiov1alpha1.ReclaimPolicyRetain,
			},
		}
		Expect(env.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, class))).To(Succeed()) })
		claim := &appstudiov1alpha1.DeploymentTargetClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
			Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: class.Name},
		}
		Expect(env.Client.Create(ctx, claim)).To(Succeed())
		p := waitBound(ctx, ns, claim.Name)

		By("deleting the claim: the target turns Released, the SpaceRequest and namespace stay")
		Expect(env.Client.Delete(ctx, claim)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(claim).Should(BeTrue())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p.target), p.target)).To(Succeed())
			g.Expect(p.target.Status.Phase).To(Equal(appstudiov1alpha1.DeploymentTargetPhaseReleased))
			g.Expect(p.target.Spec.ClaimRef).To(BeNil())
		}).WithContext(ctx).Should(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p.spaceRequest), p.spaceRequest)).To(Succeed())
		Expect(p.spaceRequest.DeletionTimestamp).To(BeNil())
		n := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: p.namespace}, n)).To(Succeed())
		Expect(n.DeletionTimestamp).To(BeNil())

		By("deleting the Released target by hand: its SpaceRequest and namespace go")
		Expect(env.Client.Delete(ctx, p.target)).To(Succeed())
		for _, obj := range []client.Object{p.target, p.spaceRequest, n} {
			Eventually(env.isGone).WithContext(ctx).WithArguments(obj).Should(BeTrue(), "%T %s is gone", obj, obj.GetName())
		}
	})
})
