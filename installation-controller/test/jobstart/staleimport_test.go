package jobstart_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// An imported DataObject whose informer still shows its old value - the
// user updated it and started a job right away, or a parent rewrote its
// context right before handing the job over - neither starts the job with
// the old value nor fails it with ImportsChanged at the end: Init reads
// imports from the API server, and Completing confirms a difference there
// before it calls the imports changed.
func TestImportTheCacheShowsStaleIsReadLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		// staleAtEnd: the cache still shows the old value when the job
		// completes.
		staleAtEnd bool
	}{
		{name: "stale when the job starts", staleAtEnd: false},
		{name: "stale until the job completes", staleAtEnd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := "staleimport"
			// While stale is set, the reconciler's reads of the DataObject
			// return old, the copy its informer had before the update.
			var stale atomic.Bool
			var old atomic.Pointer[lsv1alpha1.DataObject]
			env, r, mgr := handDriven(t, ns, func(*testenv.Env) interceptor.Funcs {
				return interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if do, ok := obj.(*lsv1alpha1.DataObject); ok && stale.Load() {
							old.Load().DeepCopyInto(do)
							return nil
						}
						return cl.Get(ctx, key, obj, opts...)
					},
				}
			})
			cfg := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
			g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
			old.Store(cfg.DeepCopy())
			cfg.Data = lsv1alpha1.NewAnyJSON([]byte(`"new"`))
			g.Expect(env.Client.Update(ctx, cfg)).To(Succeed())
			stale.Store(true)

			inst := &lsv1alpha1.Installation{
				ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: ns,
					Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
				Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
					Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: "imports:\n- name: greeting\n  type: data\n" +
						// The item's configuration shows the value the job started with.
						blueprintYAML + "        providerStatus:\n          greeting: {{ .imports.greeting }}\n"}}}},
			}
			inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "cfg"}}
			g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)}
			cachedInst := func() (*lsv1alpha1.Installation, error) {
				i := &lsv1alpha1.Installation{}
				return i, mgr.GetCache().Get(ctx, req.NamespacedName, i)
			}
			g.Eventually(func() error { _, err := cachedInst(); return err }, timeout).Should(Succeed())

			// The job starts with the current value.
			_, err := r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
			g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "%v", inst.Status.LastError)
			job := inst.Status.JobID
			exec := &lsv1alpha1.Execution{}
			g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
			g.Expect(string(exec.Spec.DeployItems[0].Config.Raw)).To(ContainSubstring(`"greeting":"new"`))

			// The execution finishes, as its controller would report it.
			finishExecution(g, env, mgr, req, job, nil)
			stale.Store(tc.staleAtEnd)

			// It succeeds: nothing changed during the job.
			g.Eventually(func(g Gomega) {
				_, err := r.Reconcile(ctx, req)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
				g.Expect(inst.Status.JobIDFinished).To(Equal(job))
			}, timeout).Should(Succeed())
			g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), fmt.Sprint(inst.Status.LastError))
		})
	}
}
