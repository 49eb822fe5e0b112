package jobstart_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// twoItems is blueprintYAML with a second item: the user's edit.
const twoItems = blueprintYAML + `    - name: second
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
`

// editRacingTheStart starts a root job whose annotation consume conflicts
// because the user edited the spec (a second item) at that moment: the first
// reconcile created the execution with one item and handed it a job, which
// it returns. When execStarted, the execution controller then starts that job
// with the one item, as it would before the retry. The retry (second
// reconcile) runs once the cache shows the edit.
func editRacingTheStart(t *testing.T, ns string, execStarted bool) (*testenv.Env, *installation.Reconciler, ctrl.Manager, ctrl.Request, string) {
	g := NewWithT(t)
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "root"}}
	var patches atomic.Int32
	env, r, mgr := handDriven(t, ns, func(env *testenv.Env) interceptor.Funcs {
		return interceptor.Funcs{
			Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*lsv1alpha1.Installation); ok && patches.Add(1) == 1 {
					// The user's edit lands between the reconcile's read and its consume.
					inst := &lsv1alpha1.Installation{}
					if err := env.Client.Get(ctx, req.NamespacedName, inst); err != nil {
						return err
					}
					inst.Spec.Blueprint.Inline.Filesystem[lsv1alpha1.BlueprintFileName] = twoItems
					if err := env.Client.Update(ctx, inst); err != nil {
						return err
					}
					return apierrors.NewConflict(schema.GroupResource{Group: lsv1alpha1.SchemeGroupVersion.Group, Resource: "installations"},
						obj.GetName(), errors.New("injected by the test: the spec was edited"))
				}
				return cl.Patch(ctx, obj, patch, opts...)
			},
		}
	})
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: blueprintYAML}}}},
	})).To(Succeed())
	g.Eventually(func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, &lsv1alpha1.Installation{}) }, timeout).Should(Succeed())

	// Reconcile 1: the execution is created (one item) and handed a job;
	// the consume conflicts with the edit.
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	exec := &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
	first := exec.Status.JobID
	g.Expect(first).NotTo(BeEmpty())
	g.Expect(exec.Spec.DeployItems).To(HaveLen(1))
	if execStarted {
		exec.Status.Phase, exec.Status.ObservedGeneration = lsv1alpha1.PhaseInit, exec.Generation
		g.Expect(env.Client.Status().Update(ctx, exec, client.FieldOwner("execution-controller"))).To(Succeed())
	}
	g.Eventually(func() (int64, error) {
		i := &lsv1alpha1.Installation{}
		return i.Generation, mgr.GetCache().Get(ctx, req.NamespacedName, i)
	}, timeout).Should(BeNumerically("==", 2))
	g.Eventually(func() (string, error) {
		e := &lsv1alpha1.Execution{}
		return e.Status.JobID, mgr.GetCache().Get(ctx, req.NamespacedName, e)
	}, timeout).Should(Equal(first))

	// Reconcile 2, the retry: it starts the job for the edited spec.
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	return env, r, mgr, req, first
}

// A spec edit that collides with a root job's start (the consume of the
// reconcile annotation conflicts) starts the job for the new spec under a
// new ID, so the execution runs it with the new items: the retry does not
// find the first attempt's job handed over and take it for its own.
func TestSpecEditRacingAJobStartRunsTheNewSpec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, r, mgr, req, first := editRacingTheStart(t, "specedit", false)
	inst, exec := &lsv1alpha1.Installation{}, &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
	job := inst.Status.JobID
	g.Expect(job).NotTo(Equal(first), "the job for generation 2 is not the one handed over with generation 1's items")
	g.Expect(inst.Status.ObservedGeneration).To(BeNumerically("==", 2))
	g.Expect(inst.Annotations).To(HaveKeyWithValue(installation.StartedJobAnnotation, job))
	g.Expect(exec.Status.JobID).To(Equal(job))
	g.Expect(exec.Spec.DeployItems).To(HaveLen(2))

	// The execution runs that job with the spec it has (both items).
	finishExecution(g, env, mgr, req, job, func(e *lsv1alpha1.Execution) { e.Status.ObservedGeneration = e.Generation })
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "%v", inst.Status.LastError)
}

// When the execution had already started the first attempt's job with the
// old items, the hand-over of the new job cannot change what it runs (an
// execution keeps the item set its job started with): it finishes with
// status.observedGeneration older than its spec. The installation does not
// report that as the new spec deployed: the job fails SpecChanged, naming
// the execution, instead of Succeeded with the new item never deployed.
func TestExecutionThatRanAnOlderSpecFailsTheJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, r, mgr, req, _ := editRacingTheStart(t, "specedit", true)
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	job := inst.Status.JobID
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))

	// The execution finishes the job with the item set it started with
	// (observedGeneration 1; its spec is at generation 2).
	finishExecution(g, env, mgr, req, job, nil)
	exec := &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(ctx, req.NamespacedName, exec)).To(Succeed())
	g.Expect(exec.Status.ObservedGeneration).To(BeNumerically("<", exec.Generation))
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, req.NamespacedName, inst)).To(Succeed())
	g.Expect(inst.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(inst.Status.JobIDFinished).To(Equal(job))
	g.Expect(inst.Status.LastError).NotTo(BeNil())
	g.Expect(inst.Status.LastError.Reason).To(Equal(installation.ReasonSpecChanged))
	g.Expect(inst.Status.LastError.Message).To(ContainSubstring("execution root ran the job with its spec of generation 1, not the current 2"))
}
