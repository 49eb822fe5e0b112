// Package jobstart_test drives the installation reconciler by hand, one
// Reconcile call at a time against a real API server, to pin down how a root
// installation's job starts: the execution is created and handed the job
// before the reconcile annotation is consumed, and a consume that fails (a
// conflict, or a crash before it) neither loses the request nor starts a
// second job. It also pins down that a job waits for a sub-object its cache
// does not show yet (cachelag_test.go).
//
// It is a test binary of its own: package installation's tests run a
// manager whose reconciler would race the calls made here.
package jobstart_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/testenv"
)

const blueprintYAML = `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
`

// timeout bounds every wait for the cache.
const timeout = 30 * time.Second

func TestRootJobHandsOverBeforeConsumingTheAnnotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// The first metadata patch of the installation conflicts, as it would
	// after a concurrent change; before answering, record what the API
	// server shows of the execution at that moment.
	var patches atomic.Int32
	handedWhenConsumed := "(no execution)"
	env, r, mgr := handDriven(t, "jobstart", func(env *testenv.Env) interceptor.Funcs {
		return interceptor.Funcs{
			Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*lsv1alpha1.Installation); ok && patches.Add(1) == 1 {
					exec := &lsv1alpha1.Execution{}
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), exec); err == nil {
						handedWhenConsumed = exec.Status.JobID
					}
					return apierrors.NewConflict(schema.GroupResource{Group: lsv1alpha1.SchemeGroupVersion.Group, Resource: "installations"},
						obj.GetName(), errors.New("injected by the test"))
				}
				return cl.Patch(ctx, obj, patch, opts...)
			},
		}
	})

	inst := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "jobstart",
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: blueprintYAML}}}},
	}
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	job := jobid.Derive(string(inst.UID), "", "", "false", "1")
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "jobstart", Name: "root"}}
	get := func() (*lsv1alpha1.Installation, *lsv1alpha1.Execution) {
		i, e := &lsv1alpha1.Installation{}, &lsv1alpha1.Execution{}
		g.Expect(env.Client.Get(ctx, req.NamespacedName, i)).To(Succeed())
		if err := env.Client.Get(ctx, req.NamespacedName, e); !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		return i, e
	}

	inCache := func(obj client.Object) func() error {
		return func() error { return mgr.GetCache().Get(ctx, req.NamespacedName, obj) }
	}
	g.Eventually(inCache(&lsv1alpha1.Installation{}), timeout).Should(Succeed())

	// First reconcile: the execution is created and handed the job, then
	// the consume conflicts; nothing of the installation is written.
	res, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "a conflicting consume is retried")
	g.Expect(handedWhenConsumed).To(Equal(job), "the execution had the job before the annotation was consumed")
	got, exec := get()
	g.Expect(exec.Status.JobID).To(Equal(job))
	g.Expect(got.Annotations).To(HaveKeyWithValue(lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile)), "the request is kept")
	g.Expect(got.Annotations).NotTo(HaveKey(installation.StartedJobAnnotation))
	g.Expect(got.Finalizers).To(BeEmpty())
	g.Expect(got.Status.JobID).To(BeEmpty(), "no status write after the failed consume")

	// Second reconcile (the retry, once the cache shows the hand-over): the
	// same job, derived from the same state, is found handed over already;
	// the annotation is consumed with the finalizer and the start record,
	// then the status is written.
	g.Eventually(func() (string, error) {
		e := &lsv1alpha1.Execution{}
		err := inCache(e)()
		return e.Status.JobID, err
	}, timeout).Should(Equal(job))
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	got, exec = get()
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	g.Expect(got.Annotations).To(HaveKeyWithValue(installation.StartedJobAnnotation, job))
	g.Expect(got.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	g.Expect(got.Status.JobID).To(Equal(job), "one job: the one handed over in the first reconcile")
	g.Expect(got.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
	g.Expect(exec.Status.JobID).To(Equal(job))
	g.Expect(patches.Load()).To(BeNumerically("==", 2), "one metadata patch per reconcile")

	// A third reconcile, once the cache shows the status (no execution
	// controller runs here, so the job waits), starts nothing new.
	g.Eventually(func() (string, error) {
		i := &lsv1alpha1.Installation{}
		err := inCache(i)()
		return i.Status.JobID, err
	}, timeout).Should(Equal(job))
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	got, _ = get()
	g.Expect(got.Status.JobID).To(Equal(job))
	g.Expect(patches.Load()).To(BeNumerically("==", 2))
}
