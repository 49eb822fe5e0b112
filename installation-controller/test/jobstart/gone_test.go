package jobstart_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/testenv"
)

func noInterception(*testenv.Env) interceptor.Funcs { return interceptor.Funcs{} }

// removeByHand deletes obj with its finalizers removed first, as someone
// who removes the finalizer by hand would, and waits until the reconciler's
// cache no longer shows it.
func removeByHand(g Gomega, env *testenv.Env, mgr ctrl.Manager, obj client.Object) {
	ctx := context.Background()
	g.Expect(env.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
	}, timeout).Should(BeTrue())
}

// A sub-installation of the running job that is gone (its finalizer removed
// by hand) is not waited for "to appear in the cache" for ever: the API
// server confirms it is gone, and the job goes on without it, as it does
// with a sub-installation deleted by hand (the next job's Init creates it
// again), with a Warning event saying so.
func TestGoneSubInstallationIsNotWaitedFor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "subgone"
	env, r, mgr := handDriven(t, ns, noInterception)
	root, req, job := startJobAndRemoveSub(g, env, r, mgr, ns, "subinstallations:\n- name: s\n  blueprint: {dir: s}\n")

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, root)).To(Succeed())
	g.Expect(root.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "%v %v", root.Status.LastError, root.Status.Conditions)
	g.Expect(root.Status.JobIDFinished).To(Equal(job))
}

// The execution of the running job gone (its finalizer removed by hand)
// fails the job with a reason that says so, instead of a wait "to appear in
// the cache" that never ends: the job's result is the execution's exports.
func TestGoneExecutionFailsTheJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, r, mgr := handDriven(t, "execgone", noInterception)
	req, job := startRootJob(g, env, r, mgr, "execgone")
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		return i.Status.JobID, mgr.GetCache().Get(ctx, req.NamespacedName, i)
	}, timeout).Should(Equal(job))
	exec := &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
	removeByHand(g, env, mgr, exec)

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed), "%v", inst.Status.Conditions)
	g.Expect(inst.Status.JobIDFinished).To(Equal(job))
	g.Expect(inst.Status.LastError.Reason).To(Equal(installation.ReasonSubObjectsFailed))
	g.Expect(inst.Status.LastError.Message).To(ContainSubstring("execution root is gone before it finished the job"))
}

// countingReader counts the reads of sub-installations the reconciler makes
// through its APIReader.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*lsv1alpha1.Installation); ok {
		c.mu.Lock()
		c.reads[key.Name]++
		c.mu.Unlock()
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// countingRecorder counts the events the reconciler emits, by reason, and
// passes them on.
type countingRecorder struct {
	events.EventRecorder
	mu      sync.Mutex
	reasons map[string]int
}

func (c *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.mu.Lock()
	c.reasons[reason]++
	c.mu.Unlock()
	c.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// A sub-installation confirmed gone stays listed in the status until the job
// ends; while another sub-installation still runs the job, each reconcile
// of the parent must not read it again from the API server nor repeat the
// SubObjectGone Warning: once per job.
func TestGoneSubInstallationIsReadAndReportedOncePerJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "subgoneonce"
	env, r, mgr := handDriven(t, ns, noInterception)
	reader := &countingReader{Reader: r.APIReader, reads: map[string]int{}}
	recorder := &countingRecorder{EventRecorder: r.Recorder, reasons: map[string]int{}}
	r.APIReader, r.Recorder = reader, recorder
	root, req, _ := startJobAndRemoveSub(g, env, r, mgr, ns, "subinstallations:\n- name: s\n  blueprint: {dir: s}\n- name: u\n  blueprint: {dir: s}\n")

	// root-u never finishes (no controller runs it here): the job stays
	// Progressing, and each reconcile finds root-s missing from the cache.
	for range 3 {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Get(ctx, req.NamespacedName, root)).To(Succeed())
		g.Expect(root.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "%v %v", root.Status.LastError, root.Status.Conditions)
	}
	reader.mu.Lock()
	g.Expect(reader.reads["root-s"]).To(Equal(1), "live reads of the gone sub-installation")
	reader.mu.Unlock()
	recorder.mu.Lock()
	g.Expect(recorder.reasons[installation.ReasonSubObjectGone]).To(Equal(1), "SubObjectGone events")
	recorder.mu.Unlock()
}

// startJobAndRemoveSub creates the root installation (its blueprint.yaml is
// rootBlueprint; sub-installation s, and any other, use blueprintYAML),
// starts its job by hand, waits until the cache shows it, and removes
// sub-installation root-s by hand (its finalizer removed).
func startJobAndRemoveSub(g Gomega, env *testenv.Env, r *installation.Reconciler, mgr ctrl.Manager, ns, rootBlueprint string) (*lsv1alpha1.Installation, ctrl.Request, string) {
	ctx := context.Background()
	root := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{
				lsv1alpha1.BlueprintFileName: rootBlueprint,
				"s/blueprint.yaml":           blueprintYAML,
			}}}},
	}
	g.Expect(env.Client.Create(ctx, root)).To(Succeed())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(root)}
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())
	// The job starts: the sub-installation is created and handed the job.
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, root)).To(Succeed())
	job := root.Status.JobID
	g.Expect(root.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "%v", root.Status.Conditions)
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		return i.Status.JobID, mgr.GetCache().Get(ctx, req.NamespacedName, i)
	}, timeout).Should(Equal(job))

	sub := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root-s"}, sub)).To(Succeed())
	removeByHand(g, env, mgr, sub)
	return root, req, job
}
