package lib_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

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
