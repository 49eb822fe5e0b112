package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/claim"
)

// TestClaimOfAnotherProvisionersClassIsNotProvisioned: a tenant marks its
// claim for the sandbox provisioner (the binder's annotation, which the
// tenant may write) while the claim names a class of another provisioner.
// Nothing is provisioned for it, and a Warning on the claim says why, cut to
// an Event's bound however long the class's provisioner name. A class whose
// namespace limits cannot work is refused the same way. Another tenant's
// claim of a sandbox class is provisioned, its SpaceRequest carrying the
// class's namespace limits (defaults filled in).
func TestClaimOfAnotherProvisionersClassIsNotProvisioned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := unique("tenancy")
	createClass(t, n, appstudiov1alpha1.ReclaimPolicyDelete, `{"namespaceLimits":{"cpu":"4","pods":"30"}}`)
	createClass(t, n+"-bad", appstudiov1alpha1.ReclaimPolicyDelete, `{"namespaceLimits":{"pods":"-1"}}`)
	foreign := &appstudiov1alpha1.DeploymentTargetClass{
		ObjectMeta: metav1.ObjectMeta{Name: n + "-foreign"},
		Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
			Provisioner: "example.com/" + strings.Repeat("hypershift", 150),
			Parameters:  &runtime.RawExtension{Raw: []byte(`{"namespaceLimits":{"cpu":"16"}}`)},
		},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	createNamespace(t, n)
	createNamespace(t, n+"-b")
	startManager(t, 2)

	hostile := createClaim(t, n, "hostile", foreign.Name, appstudiov1alpha1.SandboxProvisioner)
	bad := createClaim(t, n, "bad", n+"-bad", appstudiov1alpha1.SandboxProvisioner)
	g.Eventually(func(g Gomega) []string { return claimNotes(g, hostile, claim.EventClassProvisionerMismatch) }).
		WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(And(
		HavePrefix("DeploymentTargetClass "+foreign.Name+" names provisioner"),
		WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", status.MaxEventNote)))))
	g.Eventually(func(g Gomega) []string { return claimNotes(g, bad, claim.EventInvalidParameters) }).
		WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(ContainSubstring("pods must not be negative")))

	// Another tenant's claim is provisioned meanwhile.
	good := createClaim(t, n+"-b", "good", n, appstudiov1alpha1.SandboxProvisioner)
	sr := waitForOneSpaceRequest(t, good)
	limits, err := toolchainv1alpha1.ParseNamespaceLimits(sr.Annotations[toolchainv1alpha1.NamespaceLimitsAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(limits.CPU.String()).To(Equal("4"))
	g.Expect(limits.Pods.String()).To(Equal("30"))
	g.Expect(limits.Memory.String()).To(Equal(toolchainv1alpha1.DefaultNamespaceLimits().Memory.String()))
	playStub(t, sr)
	waitForTarget(t, good)

	g.Consistently(func(g Gomega) int { return len(spaceRequestsOf(g, hostile)) + len(spaceRequestsOf(g, bad)) }).
		WithTimeout(2 * time.Second).WithPolling(interval).Should(BeZero())
}
