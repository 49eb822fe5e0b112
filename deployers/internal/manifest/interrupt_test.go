package manifest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// TestInterruptDuringApplyKeepsTheRecord: the execution controller's
// interrupt (phase Failed, jobIDFinished, guarded by the resourceVersion, as
// patch.FailItem writes it) lands after the deployer read the item and before
// the status write of its first apply, so that write conflicts. The object
// was created on the target all the same: managedResources must record it
// (seed 002: an interrupt only sets the item Failed), and deleting the item
// deletes it.
func TestInterruptDuringApplyKeepsTheRecord(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", map[string]string{lsv1alpha1.EnvironmentAnnotation: "interrupt"})
	var fired atomic.Bool
	// BeforeReconcile runs after the deployer read the item (and wrote the
	// finalizer), right before the apply.
	hook := func(_ context.Context, _ logr.Logger, di *lsv1alpha1.DeployItem, _ *lsv1alpha1.Target, _ extension.HookType) (*extension.HookResult, error) {
		if di == nil || di.Name != "interrupted" || fired.Swap(true) {
			return nil, nil
		}
		// Errors are returned, not asserted: this runs in the deployer's
		// goroutine (an error ends the reconcile; the test then fails on
		// the phase).
		cur := &lsv1alpha1.DeployItem{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur); err != nil {
			return nil, err
		}
		base := cur.DeepCopy()
		now := metav1.Now()
		cur.Status.Phase = lsv1alpha1.PhaseFailed
		cur.Status.JobIDFinished = cur.Status.JobID
		cur.Status.LastError = &lsv1alpha1.Error{Operation: "Interrupted", Reason: "Interrupted", Message: "interrupted by the test",
			Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}, LastTransitionTime: now, LastUpdateTime: now}
		locked := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		return nil, env.Client.Status().Patch(ctx, cur, locked, client.FieldOwner("execution-controller"))
	}
	testutil.StartManager(t, env, func(mgr ctrl.Manager) error {
		sel, err := lib.ParseTargetSelector(lsv1alpha1.EnvironmentAnnotation+"=interrupt", "")
		if err != nil {
			return err
		}
		return manifest.AddToManager(mgr, manifest.Options{Name: "manifest-interrupt", TargetSelector: sel, Namespaces: []string{ns}, TargetClients: loopbackTargets,
			Hooks: extension.ReconcileExtensionHooks{}.RegisterHook(hook, extension.BeforeReconcileHook)})
	})

	di := item(ns, "interrupted", "t", v2(`"manifests":[{"manifest":`+cm(ns, "applied-while-interrupted", map[string]string{"k": "v"})+`}]`))
	di.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	// The execution hands a job over.
	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Annotations = map[string]string{lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339)}
	})).To(Succeed())
	base := cur.DeepCopy()
	cur.Status.JobID = "job-1"
	g.Expect(env.Client.Status().Patch(ctx, cur, client.MergeFrom(base), client.FieldOwner("execution-controller"))).To(Succeed())

	g.Eventually(recorded(g, di), timeout, interval).Should(ConsistOf("ConfigMap " + ns + "/applied-while-interrupted"))
	g.Expect(fired.Load()).To(BeTrue())
	g.Expect(get(g, di)()).To(failedWith("Interrupted", lsv1alpha1.ErrorInterrupted, "interrupted by the test"), "the interrupt's outcome stands")
	g.Expect(configMap(g, ns, "applied-while-interrupted")()).To(Equal(map[string]string{"k": "v"}))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Eventually(configMap(g, ns, "applied-while-interrupted"), timeout, interval).Should(BeNil(), "uninstalled with the item")
}
