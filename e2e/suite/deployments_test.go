package suite

import (
	"context"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// UpgradeImageEnv names, as COMPONENT=IMAGE, a second image of one Terrace
// component (make e2e-node pushes one) for the rolling-upgrade spec.
const UpgradeImageEnv = "E2E_UPGRADE_IMAGE"

// rolloutTimeout bounds a Deployment's rollout on the local node.
const rolloutTimeout = 3 * time.Minute

// podsOf returns the pods of a Terrace component, by name.
func podsOf(ctx context.Context, g Gomega, component string) map[string]corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(terraceNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": component})).To(Succeed())
	byName := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		byName[p.Name] = p
	}
	return byName
}

// podUIDs returns the UIDs of every pod of the components given.
func podUIDs(ctx context.Context, components []string) map[string]types.UID {
	uids := map[string]types.UID{}
	for _, c := range components {
		for name, p := range podsOf(ctx, Default, c) {
			uids[name] = p.UID
		}
	}
	return uids
}

// rolledOut waits until the component's Deployment runs replicas ready pods
// of its current template and no other pod.
func rolledOut(ctx context.Context, component string, replicas int32) {
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: component}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(d.Status.Replicas).To(Equal(replicas), "no pod of an older template is left")
		g.Expect(d.Status.ReadyReplicas).To(Equal(replicas))
	}).WithContext(ctx).WithTimeout(rolloutTimeout).WithPolling(time.Second).
		Should(Succeed(), "deployment %s/%s rolled out with %d replicas", terraceNamespace, component, replicas)
}

// leaseHolder returns the pod that holds the component's leader Lease.
func leaseHolder(ctx context.Context, g Gomega, component string) string {
	lease := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: component + ".terrace.dev"}, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	// controller-runtime's identity is <hostname>_<uuid>; a pod's hostname is its name.
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod
}

// mockJob runs a root installation of one mock item and returns when its job
// succeeded.
func mockJob(ctx context.Context, ns, name string) {
	root := createInstallation(ctx, ns, installation(name, mockItem("item", "phase: Succeeded")))
	Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
		Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
}

var _ = Describe("Terrace as Deployments", Serial, func() {
	BeforeEach(func() {
		if env.Local() {
			Skip("needs Terrace deployed as Deployments (make e2e-node)")
		}
	})

	It("upgrades one component's image mid-job: its Deployment rolls, the others keep their pods, the job completes once", func(ctx SpecContext) {
		component, image, ok := strings.Cut(os.Getenv(UpgradeImageEnv), "=")
		if !ok {
			Skip(UpgradeImageEnv + " names no second image (make e2e-node pushes one)")
		}
		ns := newNamespace(ctx, "upgrade")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		var others []string
		for _, b := range binaries {
			if b != component {
				others = append(others, b)
			}
		}
		before := podUIDs(ctx, others)

		job := startSlowJob(ctx, ns, "upgrade", "after-upgrade")

		By("setting " + component + "'s image to " + image)
		d := &appsv1.Deployment{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: component}, d)).To(Succeed())
		previous := d.Spec.Template.Spec.Containers[0].Image
		Expect(previous).NotTo(Equal(image), "the second image must differ from the deployed one")
		setImage(ctx, component, image)
		DeferCleanup(func(ctx SpecContext) {
			setImage(ctx, component, previous)
			rolledOut(ctx, component, 1)
		})
		rolledOut(ctx, component, 1)
		for _, p := range podsOf(ctx, Default, component) {
			if p.DeletionTimestamp == nil { // the old pod may still be shutting down
				Expect(p.Spec.Containers[0].Image).To(Equal(image))
			}
		}

		job.completesOnce(ctx)

		By("the other components kept their pods")
		Expect(podUIDs(ctx, others)).To(Equal(before))
	})

	It("runs a deployer with two replicas: one leads, the other takes over when the leader's pod goes, jobs complete", func(ctx SpecContext) {
		const component = "mock-deployer"
		ns := newNamespace(ctx, "replicas")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		scale(ctx, component, 2)
		DeferCleanup(func(ctx SpecContext) {
			scale(ctx, component, 1)
			rolledOut(ctx, component, 1)
		})
		rolledOut(ctx, component, 2)

		By("one of the two pods holds the Lease and serves a job")
		var leader string
		Eventually(func(g Gomega) {
			leader = leaseHolder(ctx, g, component)
			g.Expect(podsOf(ctx, g, component)).To(HaveKey(leader))
		}).WithContext(ctx).Should(Succeed())
		mockJob(ctx, ns, "before")

		By("deleting the leader's pod " + leader + ": another replica takes the Lease")
		pod := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: leader}, pod)).To(Succeed())
		Expect(env.Client.Delete(ctx, pod)).To(Succeed())
		// The standby replica usually wins; the pod that replaces the leader
		// may too: either is a hand-over.
		Eventually(func(g Gomega) {
			holder := leaseHolder(ctx, g, component)
			g.Expect(holder).NotTo(Equal(leader))
			g.Expect(podsOf(ctx, g, component)).To(HaveKey(holder))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		mockJob(ctx, ns, "after")
	})
})

func setImage(ctx context.Context, component, image string) {
	d := &appsv1.Deployment{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: component}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.Containers[0].Image = image
	Expect(env.Client.Patch(ctx, d, patch)).To(Succeed())
}

func scale(ctx context.Context, component string, replicas int32) {
	d := &appsv1.Deployment{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: component}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	Expect(env.Client.Patch(ctx, d, patch)).To(Succeed())
}
