package jobstart_test

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// A job whose execution the cache does not show (the Execution informer lags
// behind the Installation's) waits for it in Progressing: it does not take
// the execution for absent and finish before its deploy items.
func TestProgressingWaitsForAnExecutionTheCacheDoesNotShow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// While hide is set, the reconciler's reads do not find the execution.
	var hide atomic.Bool
	env, r, mgr := handDriven(t, "cachelag", hiding(func(obj client.Object) bool {
		_, isExec := obj.(*lsv1alpha1.Execution)
		return isExec && hide.Load()
	}))
	// The job starts: the execution is created and handed the job.
	req, job := startRootJob(g, env, r, mgr, "cachelag")
	inst := &lsv1alpha1.Installation{}

	// The execution finishes (as its controller would report it), and the
	// installation's cache shows the job - but not, yet, the execution.
	finishExecution(g, env, mgr, req, job, nil)
	hide.Store(true)
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "the job waits for the execution it created")
	g.Expect(inst.Status.JobIDFinished).NotTo(Equal(job))

	// Once the cache shows it, the job finishes.
	hide.Store(false)
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
		g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}, timeout).Should(Succeed())
}

// An imported DataObject the cache does not show yet (a parent's context
// object or a predecessor's export, written right before the write that
// woke the reconcile) is read from the API server: the job starts, instead
// of failing with ImportNotFound.
func TestImportTheCacheDoesNotShowIsReadLive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, r, mgr := handDriven(t, "cachelag", hiding(func(obj client.Object) bool {
		_, isData := obj.(*lsv1alpha1.DataObject)
		return isData
	}))
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: "cachelag", Name: "cfg"},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"hello"`))})).To(Succeed())
	inst := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: "cachelag",
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: "imports:\n- name: greeting\n  type: data\n" + blueprintYAML}}}},
	}
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "cfg"}}
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)}
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.LastError).To(BeNil())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
}

// The execution's exports DataObject, written right before the execution
// status that wakes Completing but on another watch, is read live when the
// cache does not show it yet: no event of it would wake the installation.
func TestExecutionExportsTheCacheDoesNotShowAreReadLive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, r, mgr := handDriven(t, "exportlag", hiding(func(obj client.Object) bool {
		_, isData := obj.(*lsv1alpha1.DataObject)
		return isData
	}))
	req, job := startRootJob(g, env, r, mgr, "exportlag")

	// The execution controller writes the exports, then finishes the job.
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: "exportlag", Name: "root-exports"},
		Data: lsv1alpha1.NewAnyJSON([]byte(`{"item":{"url":"x"}}`))})).To(Succeed())
	finishExecution(g, env, mgr, req, job, func(exec *lsv1alpha1.Execution) {
		exec.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: "root-exports", Namespace: "exportlag"}
	})

	// One reconcile finishes the job: it does not wait for the cache.
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "%v", inst.Status.Conditions)
}

// startRootJob creates root installation "root" in ns (blueprintYAML: one
// mock item), waits until the reconciler's cache shows it, and runs the one
// reconcile that starts its job: the execution created and handed the job.
// It returns the installation's request and the job.
func startRootJob(g Gomega, env *testenv.Env, r *installation.Reconciler, mgr ctrl.Manager, ns string) (ctrl.Request, string) {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: blueprintYAML}}}},
	})).To(Succeed())
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "root"}}
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
	return req, inst.Status.JobID
}

// finishExecution reports the root's execution finished with job, as the
// execution controller would (report may add to the status), and waits
// until the reconciler's cache shows the installation's job and the
// finished execution.
func finishExecution(g Gomega, env *testenv.Env, mgr ctrl.Manager, req ctrl.Request, job string, report func(*lsv1alpha1.Execution)) {
	ctx := context.Background()
	exec := &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
	exec.Status.JobIDFinished, exec.Status.Phase = job, lsv1alpha1.PhaseSucceeded
	if report != nil {
		report(exec)
	}
	g.Expect(env.Client.Status().Update(ctx, exec, client.FieldOwner("execution-controller"))).To(Succeed())
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		return i.Status.JobID, mgr.GetCache().Get(ctx, req.NamespacedName, i)
	}, timeout).Should(Equal(job))
	g.Eventually(func() (string, error) {
		e := &lsv1alpha1.Execution{}
		return e.Status.JobIDFinished, mgr.GetCache().Get(ctx, req.NamespacedName, e)
	}, timeout).Should(Equal(job))
}

// A sub-installation writes its export into its parent's context right
// before the status that wakes the parent, on another watch. The parent's
// Completing lists its context from the API server: a cache that does not
// show the export yet must not make it export a missing value.
func TestSubInstallationExportsTheCacheDoesNotShowAreListedLive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "subexportlag"
	// While hide is set, the reconciler's lists of DataObjects come back
	// empty: the cache has not seen the sub-installation's export yet.
	var hide atomic.Bool
	env, r, mgr := handDriven(t, ns, func(*testenv.Env) interceptor.Funcs {
		return interceptor.Funcs{
			List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*lsv1alpha1.DataObjectList); ok && hide.Load() {
					return nil
				}
				return cl.List(ctx, list, opts...)
			},
		}
	})
	root := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{
				lsv1alpha1.BlueprintFileName: `exports:
- name: url
  type: data
  schema: {type: string}
subinstallations:
- name: s
  blueprint:
    dir: s
  exports:
    data:
    - name: url
      dataRef: s-url
exportExecutions:
- name: exports
  type: GoTemplate
  template: |
    exports:
      url: {{ index .values.dataobjects "s-url" }}
`,
				"s/blueprint.yaml": "exports:\n- name: url\n  type: data\n",
			}}}},
	}
	root.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "url", DataRef: "root-url"}}
	g.Expect(env.Client.Create(ctx, root)).To(Succeed())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(root)}
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())
	// The job starts: the sub-installation is created and handed the job.
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, root)).To(Succeed())
	job := root.Status.JobID
	g.Expect(root.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "%v", root.Status.Conditions)

	// The sub-installation writes its export into the parent's context, then
	// finishes the job (as its own reconciles would).
	hide.Store(true)
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.DataObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: installation.ScopedName("root", "s-url"),
			Labels:      map[string]string{installation.ContextLabel: "root"},
			Annotations: map[string]string{installation.KeyAnnotation: "s-url"}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"https://s.example.com"`)),
	})).To(Succeed())
	sub := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root-s"}, sub)).To(Succeed())
	sub.Status.JobIDFinished, sub.Status.Phase = job, lsv1alpha1.PhaseSucceeded
	g.Expect(env.Client.Status().Update(ctx, sub, client.FieldOwner("installation-controller"))).To(Succeed())
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		return i.Status.JobIDFinished, mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(sub), i)
	}, timeout).Should(Equal(job))
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		return i.Status.JobID, mgr.GetCache().Get(ctx, req.NamespacedName, i)
	}, timeout).Should(Equal(job))

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, root)).To(Succeed())
	g.Expect(root.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "%v %v", root.Status.LastError, root.Status.Conditions)
	exported := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root-url"}, exported)).To(Succeed())
	g.Expect(string(exported.Data.RawMessage)).To(Equal(`"https://s.example.com"`))
}
