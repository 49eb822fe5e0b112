package jobstart_test

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// A phase whose wait is interrupted by an error it retries does not keep
// saying that it waits: Ready (reason Progressing) says the phase is
// retried, next to lastError. When the retry finds the same wait, Ready says
// so again, but the wait's ExportNameTaken event is not sent twice. Here
// Completing waits for the name of its export, held by a DataObject being
// deleted, and one read of that name fails.
func TestWaitInterruptedByARetriedErrorSaysSoWithoutRepeatingItsEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "waitretry"
	var fail atomic.Bool
	env, r, mgr := handDriven(t, ns, func(*testenv.Env) interceptor.Funcs {
		return interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*lsv1alpha1.DataObject); ok && key.Name == "root-out" && fail.Load() {
					return apierrors.NewServiceUnavailable("injected")
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		}
	})
	recorder := &countingRecorder{EventRecorder: r.Recorder, reasons: map[string]int{}}
	r.Recorder = recorder
	held := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root-out", Finalizers: []string{"test.terrace.dev/hold"}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	g.Expect(env.Client.Create(ctx, held)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, held)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Patch(ctx, held, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{
			Exports: lsv1alpha1.InstallationExports{Data: []lsv1alpha1.DataExport{{Name: "out", DataRef: "root-out"}}},
			Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{
				lsv1alpha1.BlueprintFileName: blueprintYAML + "exports:\n- name: out\n  type: data\n" +
					"exportExecutions:\n- name: e\n  type: GoTemplate\n  template: |\n    exports:\n      out: x\n"}}}},
	})).To(Succeed())
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "root"}}
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())
	g.Eventually(func() error {
		return mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(held), &lsv1alpha1.DataObject{})
	}, timeout).Should(Succeed())
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	finishExecution(g, env, mgr, req, inst.Status.JobID, nil)

	ready := func() *metav1.Condition {
		i := &lsv1alpha1.Installation{}
		g.Expect(env.Client.Get(ctx, req.NamespacedName, i)).To(Succeed())
		g.Expect(i.Status.Phase).To(Equal(lsv1alpha1.PhaseCompleting), "%v", i.Status.LastError)
		return apimeta.FindStatusCondition(i.Status.Conditions, lsv1alpha1.ConditionReady)
	}
	// reconcile runs one reconcile once the cache shows what the last one
	// wrote (a reconcile on an older copy writes nothing).
	reconcile := func() error {
		i := &lsv1alpha1.Installation{}
		g.Expect(env.Client.Get(ctx, req.NamespacedName, i)).To(Succeed())
		g.Eventually(func() (string, error) {
			c := &lsv1alpha1.Installation{}
			return c.ResourceVersion, mgr.GetCache().Get(ctx, req.NamespacedName, c)
		}, timeout).Should(Equal(i.ResourceVersion))
		_, err := r.Reconcile(ctx, req)
		return err
	}
	const waitMsg = "phase Completing waits for DataObject waitretry/root-out to go"
	g.Expect(reconcile()).To(Succeed())
	g.Expect(ready()).To(And(HaveField("Reason", "Waiting"), HaveField("Message", ContainSubstring(waitMsg))))

	fail.Store(true)
	g.Expect(reconcile()).To(MatchError(ContainSubstring("injected")))
	g.Expect(ready()).To(And(HaveField("Reason", installation.ReasonProgressing), HaveField("Message", ContainSubstring("phase Completing meets an error and is retried"))))

	fail.Store(false)
	g.Expect(reconcile()).To(Succeed())
	g.Expect(ready()).To(And(HaveField("Reason", "Waiting"), HaveField("Message", ContainSubstring(waitMsg))))
	recorder.mu.Lock()
	defer recorder.mu.Unlock()
	g.Expect(recorder.reasons[installation.ReasonExportNameTaken]).To(Equal(1), "ExportNameTaken events")
}
