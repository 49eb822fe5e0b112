package lib_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

func gone(g *WithT, di *lsv1alpha1.DeployItem) func() bool {
	return func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return apierrors.IsNotFound(err)
	}
}

// TestDeletionWithNothingToUninstall: an item whose Target or Context was
// wrong from the start never reached the deployer; deleting it needs neither
// and completes without calling Delete (no delete-without-uninstall needed).
func TestDeletionWithNothingToUninstall(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	typo := newItem(ns, "typo")
	typo.Spec.Target = &lsv1alpha1.ObjectReference{Name: "no-such-target"}
	noCtx := newItem(ns, "no-ctx")
	noCtx.Spec.Context = "no-such-context"
	for _, di := range []*lsv1alpha1.DeployItem{typo, noCtx} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()))
		g.Expect(get(g, di)().Status.ProviderStatus).To(BeNil())
	}
	for _, di := range []*lsv1alpha1.DeployItem{typo, noCtx} {
		g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
		g.Eventually(gone(g, di), timeout, interval).Should(BeTrue(), "deleting %s", di.Name)
		for _, tr := range rec.Traces(ns, di.Name) {
			g.Expect(tr).NotTo(ContainSubstring(",Delete"), "nothing to uninstall: Delete is not called")
		}
		g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, di.Name) }, timeout, interval).
			Should(ContainElement("Normal/Deleted"))
	}
}

// TestDeletionWithoutTargetAfterInstallFails: an item that did install
// (providerStatus recorded) and then lost its Target cannot be uninstalled:
// the deletion fails, and lastError names both ways on.
func TestDeletionWithoutTargetAfterInstallFails(t *testing.T) {
	ns, g := setup(t, &behaviour{onReconcile: func(req *lib.Request) {
		req.Item.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.org/v1","kind":"Status","installed":true}`)}
	}})
	ctx := context.Background()
	target := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns}, Spec: lsv1alpha1.TargetSpec{Type: "example.org/any"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	di := newItem(ns, "installed")
	di.Spec.Target = &lsv1alpha1.ObjectReference{Name: "t"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	g.Expect(env.Client.Delete(ctx, target)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseFailed))
	le := get(g, di)().Status.LastError
	g.Expect(le.Operation).To(Equal(lib.OperationDelete))
	g.Expect(le.Reason).To(Equal(lib.ReasonTargetNotFound))
	g.Expect(le.Message).To(And(ContainSubstring(lsv1alpha1.OperationAnnotation+": "+string(lsv1alpha1.OperationReconcile)),
		ContainSubstring(lsv1alpha1.DeleteWithoutUninstallAnnotation)))
	annotate(g, di, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}
