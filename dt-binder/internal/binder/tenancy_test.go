package binder_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/claim"
	"github.com/terrace-dev/terrace/kit/status"
)

// TestForgedProvisionerMarkIsCorrected: a tenant creates its claim already
// marked for the sandbox provisioner while its class names another
// provisioner (one with a name long enough that the Event quoting it would
// exceed an Event's bound). The binder marks it for its class's provisioner
// and says so in an Event cut to that bound, which is recorded; another
// tenant's claim of a sandbox class is marked for the sandbox meanwhile.
func TestForgedProvisionerMarkIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ns, other := newNamespace(t), newNamespace(t)
	provisioner := "example.com/" + strings.Repeat("hypershift", 100)
	foreign := newClassFor(t, provisioner)
	sandbox := newClass(t, appstudiov1alpha1.ReclaimPolicyDelete)
	startBinder(t, binder.Options{}, ns, other)
	forged := newClaim(ns, "forged", foreign.Name, "")
	forged.Annotations = map[string]string{appstudiov1alpha1.ProvisionerAnnotation: appstudiov1alpha1.SandboxProvisioner}
	create(t, forged, newClaim(other, "honest", sandbox.Name, ""))

	c := eventuallyClaim(t, ns, "forged", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(c.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, provisioner))
	g.Eventually(func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(env.Client.List(t.Context(), &list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == "forged" && e.Reason == claim.EventProvisionerChanged {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf(And(
		ContainSubstring(appstudiov1alpha1.SandboxProvisioner),
		WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", status.MaxEventNote)))))

	honest := eventuallyClaim(t, other, "honest", appstudiov1alpha1.DeploymentTargetClaimPhasePending, appstudiov1alpha1.BindReasonProvisioning)
	g.Expect(honest.Annotations).To(HaveKeyWithValue(appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner))
}
