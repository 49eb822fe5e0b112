package lib_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
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

// TestExportNeverTakesOverAForeignSecret: a user's Secret named like the
// item's export Secret is neither taken over nor deleted: the job fails with
// a configuration problem naming it. The item's own export Secret is written
// and deleted as before.
func TestExportNeverTakesOverAForeignSecret(t *testing.T) {
	ns, g := setup(t, &behaviour{export: []byte(`{"url":"https://example.org"}`)})
	ctx := context.Background()
	user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-export", Namespace: ns}, Data: map[string][]byte{"password": []byte("s3cret")}}
	g.Expect(env.Client.Create(ctx, user)).To(Succeed())
	web := newItem(ns, "web")
	own := newItem(ns, "own")
	g.Expect(env.Client.Create(ctx, web)).To(Succeed())
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())

	g.Eventually(get(g, web), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()))
	le := get(g, web)().Status.LastError
	g.Expect(le.Reason).To(Equal(lib.ReasonExportConflict))
	g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(le.Message).To(ContainSubstring(ns + "/web-export"))
	g.Expect(get(g, web)().Status.ExportReference).To(BeNil())
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, "web") }, timeout, interval).
		Should(ContainElement("Warning/" + lib.ReasonExportConflict))
	userNow := func() *corev1.Secret {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(user), s)).To(Succeed())
		return s
	}
	g.Expect(userNow().Data).To(Equal(map[string][]byte{"password": []byte("s3cret")}))
	g.Expect(userNow().OwnerReferences).To(BeEmpty())

	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	ownSecret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-export"}, ownSecret)).To(Succeed())
	g.Expect(ownSecret.Data).To(HaveKey(lib.ExportKey))
	g.Expect(ownSecret.Labels).To(HaveKeyWithValue(lib.ExportOwnerLabel, "own"))
	// A second job updates the item's own Secret.
	firstJob := get(g, own)().Status.JobIDFinished
	annotate(g, own, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(func() string { return get(g, own)().Status.JobIDFinished }, timeout, interval).ShouldNot(Equal(firstJob))
	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))

	for _, di := range []*lsv1alpha1.DeployItem{web, own} {
		g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
		g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	}
	g.Expect(userNow().Data).To(Equal(map[string][]byte{"password": []byte("s3cret")}), "the user's Secret survives the item's deletion")
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-export"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the item's own export Secret is deleted with it: %v", err)
}

// TestForcedResponsibilityGetsTheTarget: a DuringResponsibilityCheck hook
// that makes the deployer responsible for an item whose Target its selector
// does not match hands the deployer that Target, like any other item's.
func TestForcedResponsibilityGetsTheTarget(t *testing.T) {
	ns, g := setup(t, nil)
	var (
		mu      sync.Mutex
		targets []string
	)
	selective.set(ns, &behaviour{
		hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
			extension.DuringResponsibilityCheckHook: func(*lsv1alpha1.DeployItem) (*extension.HookResult, error) {
				return &extension.HookResult{AbortReconcile: false}, nil
			},
		},
		onReconcile: func(req *lib.Request) {
			mu.Lock()
			defer mu.Unlock()
			name := "<nil>"
			if req.Target != nil {
				name = req.Target.Name
			}
			targets = append(targets, name)
		},
	})
	ctx := context.Background()
	target := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "unfenced", Namespace: ns}, Spec: lsv1alpha1.TargetSpec{Type: "example.org/any"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	di := newItem(ns, "forced")
	di.Spec.Type = selectiveType
	di.Spec.Target = &lsv1alpha1.ObjectReference{Name: "unfenced"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(targets).NotTo(BeEmpty())
	g.Expect(targets).To(HaveEach("unfenced"))
}

// TestResponsibilityAndShouldReconcileHookErrorsAreEvents: errors of these
// hooks are ExtensionHook Events like every other hook's, and retried.
func TestResponsibilityAndShouldReconcileHookErrorsAreEvents(t *testing.T) {
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	failOnce := func(ht extension.HookType) func(*lsv1alpha1.DeployItem) (*extension.HookResult, error) {
		return func(di *lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			if !strings.EqualFold(di.Name, string(ht)) {
				return nil, nil
			}
			mu.Lock()
			defer mu.Unlock()
			calls[di.Name]++
			if calls[di.Name] == 1 {
				return nil, errors.New("hook failed once")
			}
			return nil, nil
		}
	}
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.DuringResponsibilityCheckHook: failOnce(extension.DuringResponsibilityCheckHook),
		extension.ShouldReconcileHook:           failOnce(extension.ShouldReconcileHook),
	}})
	for _, name := range []string{strings.ToLower(string(extension.DuringResponsibilityCheckHook)), strings.ToLower(string(extension.ShouldReconcileHook))} {
		di := newItem(ns, name)
		g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
		g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, name) }, timeout, interval).
			Should(ContainElement("Warning/"+lib.OperationHook), name)
	}
}
