package lib_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// flakyType is served only by the deployer of TestLeftoverPickupIsRemoved.
const flakyType = "test.terrace.dev/flaky"

// flakyPatch fails the next failures metadata patches of deploy items with
// an internal error (500); status writes and everything else go through.
type flakyPatch struct {
	client.Client
	failures, failed *atomic.Int32
}

func (c flakyPatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*lsv1alpha1.DeployItem); ok && c.failures.Add(-1) >= 0 {
		c.failed.Add(1)
		return apierrors.NewInternalError(context.DeadlineExceeded)
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// TestLeftoverPickupIsRemoved: the metadata patch that removes
// reconcile-time after the status write ending a job (an item that has the
// finalizer already) fails. The job is Succeeded, and the stamp it left
// behind is removed by a later reconcile: it would fail the item with a
// PickupTimeout otherwise. A stamp newer than the finished job (a new job's,
// written before its job ID) stays, and the job it belongs to is taken.
func TestLeftoverPickupIsRemoved(t *testing.T) {
	failures, failed := &atomic.Int32{}, &atomic.Int32{}
	deployer := &recorder{traces: map[string][][]string{}, behaviour: map[string]*behaviour{}}
	testutil.StartManagerWithClient(t, env,
		func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			return flakyPatch{Client: c, failures: failures, failed: failed}, err
		},
		func(mgr ctrl.Manager) error {
			return lib.AddToManager(mgr, deployer, lib.Options{Type: flakyType, Name: "flaky", Version: "v0"})
		})
	ns, g := setup(t, nil)
	ctx := context.Background()
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "leftover", Namespace: ns, Labels: map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}},
		Spec:       lsv1alpha1.DeployItemSpec{Type: flakyType},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	noStamp := WithTransform(func(di *lsv1alpha1.DeployItem) map[string]string { return di.Annotations },
		Not(HaveKey(lsv1alpha1.ReconcileTimeAnnotation)))

	handOver(g, di, "job-1", nil)
	g.Eventually(get(g, di), timeout, interval).Should(And(settled(), phase(lsv1alpha1.PhaseSucceeded), noStamp,
		HaveField("Status.JobIDFinished", "job-1")))

	// job-2: the item has the finalizer, so the stamp goes only with the
	// metadata patch after the final status write, which fails.
	failures.Store(1)
	handOver(g, di, "job-2", nil)
	g.Eventually(get(g, di), timeout, interval).Should(And(finished(), phase(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobIDFinished", "job-2")))
	// The metadata patch follows the status write the test just saw.
	g.Eventually(failed.Load, timeout, interval).Should(BeEquivalentTo(1), "the metadata patch after the status write failed")
	g.Eventually(get(g, di), timeout, interval).Should(noStamp, "the leftover stamp is removed")
	g.Expect(get(g, di)().Status.JobIDFinished).To(Equal("job-2"))

	// A stamp newer than the finished job: the execution's hand-over of
	// job-3, whose ID is not written yet. It stays.
	last := get(g, di)().Status.LastReconcileTime.Time
	fresh := last.Add(3 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	annotate(g, di, lsv1alpha1.ReconcileTimeAnnotation, fresh)
	g.Consistently(get(g, di), 2*time.Second, interval).Should(
		HaveField("ObjectMeta.Annotations", HaveKeyWithValue(lsv1alpha1.ReconcileTimeAnnotation, fresh)))
	cur := get(g, di)()
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Status.JobID = "job-3"
	g.Expect(env.Client.Status().Patch(ctx, cur, patch, client.FieldOwner("execution-controller"))).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(settled(), phase(lsv1alpha1.PhaseSucceeded), noStamp,
		HaveField("Status.JobIDFinished", "job-3")))
	n := 0
	for _, tr := range deployer.Traces(ns, "leftover") {
		n += strings.Count(tr, ",Reconcile,")
	}
	g.Expect(n).To(Equal(3), "one Reconcile per job: %v", deployer.Traces(ns, "leftover"))
}

// TestForceReconcileOnADeletedItemDoesNotReapply: operation:
// force-reconcile on an item being deleted neither re-applies it while its
// deletion is pending nor after the deployer removed its finalizer (another
// finalizer still holding the item): the annotation is dropped, and the
// deletion goes on.
func TestForceReconcileOnADeletedItemDoesNotReapply(t *testing.T) {
	ns, g := setup(t, &behaviour{deletePending: true})
	ctx := context.Background()
	const hold = "test.terrace.dev/hold"
	di := newItem(ns, "held")
	di.Finalizers = []string{hold}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(settled(), phase(lsv1alpha1.PhaseSucceeded)))
	t.Cleanup(func() {
		_ = testutil.Update(ctx, env.Client, di.DeepCopy(), func(cur *lsv1alpha1.DeployItem) { cur.Finalizers = nil })
	})
	noForce := func() bool {
		for _, tr := range rec.Traces(ns, "held") {
			if strings.Contains(tr, "ForceReconcile") {
				return false
			}
		}
		return true
	}
	noOperation := WithTransform(func(di *lsv1alpha1.DeployItem) map[string]string { return di.Annotations },
		Not(HaveKey(lsv1alpha1.OperationAnnotation)))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseDeleting))
	// Pending deletion: the force-reconcile is dropped, Delete goes on.
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationForceReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(And(noOperation, phase(lsv1alpha1.PhaseDeleting)))
	g.Expect(noForce()).To(BeTrue(), "no re-apply while deleting: %v", rec.Traces(ns, "held"))

	// The deletion finishes: the deployer's finalizer goes, the foreign one holds the item.
	rec.set(ns, &behaviour{})
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(WithTransform(func(di *lsv1alpha1.DeployItem) []string { return di.Finalizers },
		Equal([]string{hold})))
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationForceReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(noOperation)
	g.Expect(noForce()).To(BeTrue(), "no re-apply of a deleted item: %v", rec.Traces(ns, "held"))
	g.Expect(get(g, di)().Finalizers).To(Equal([]string{hold}))
}

// countingClient counts the writes (patches and deletes) that go through it.
type countingClient struct {
	client.Client
	writes *atomic.Int32
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.writes.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

// TestDeleteExportWithoutExportRefCostsNothing: deleting an item that
// recorded no export Secret (status.exportRef nil) makes no request for it
// (the mock's and the manifest deployer's every deletion); one whose record
// names it deletes the item's own Secret.
func TestDeleteExportWithoutExportRefCostsNothing(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	writes := &atomic.Int32{}
	c := countingClient{Client: env.Client, writes: writes}
	di := newItem(ns, "plain")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Expect(lib.DeleteExport(ctx, c, di)).To(Succeed())
	g.Expect(writes.Load()).To(BeZero(), "no request without status.exportRef")

	g.Expect(lib.WriteExport(ctx, env.Client, "test", di, []byte(`{"k":"v"}`))).To(Succeed())
	g.Expect(di.Status.ExportReference).NotTo(BeNil())
	g.Expect(lib.DeleteExport(ctx, c, di)).To(Succeed())
	g.Expect(writes.Load()).To(BeNumerically(">", 0))
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lib.ExportSecretName(di)}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}
