package lib_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// interrupt fails the item's job the way the execution controller's
// interrupt does (patch.FailItem): phase Failed, jobIDFinished = jobID and
// lastError, guarded by the resourceVersion it read. It runs inside the
// deployer's reconcile, so it returns its error instead of failing the test.
// A non-nil providerStatus is written with it (another writer's record).
func interrupt(key client.ObjectKey, providerStatus *runtime.RawExtension) error {
	ctx := context.Background()
	cur := &lsv1alpha1.DeployItem{}
	if err := env.Client.Get(ctx, key, cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	now := metav1.Now()
	if providerStatus != nil {
		cur.Status.ProviderStatus = providerStatus
	}
	cur.Status.Phase = lsv1alpha1.PhaseFailed
	cur.Status.JobIDFinished = cur.Status.JobID
	cur.Status.LastError = &lsv1alpha1.Error{Operation: "Interrupted", Reason: "Interrupted", Message: "interrupted by the test",
		Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}, LastTransitionTime: now, LastUpdateTime: now}
	locked := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	return env.Client.Status().Patch(ctx, cur, locked, client.FieldOwner("execution-controller"))
}

// TestInterruptDuringTheWorkKeepsTheRecord: the execution controller fails
// the item (interrupt) while Reconcile works on it, so the deployer's status
// write conflicts. The job's outcome is the interrupter's (Failed,
// Interrupted), but what Reconcile installed (providerStatus) and the export
// Secret it wrote (exportRef) stay recorded, so the deletion that follows
// finds them.
func TestInterruptDuringTheWorkKeepsTheRecord(t *testing.T) {
	installed := []byte(`{"apiVersion":"example.org/v1","kind":"Status","installed":["cm-1"]}`)
	var (
		fired        atomic.Bool
		interruptErr atomic.Pointer[error]
	)
	ns, g := setup(t, &behaviour{
		export: []byte(`{"k":"v"}`),
		onReconcile: func(req *lib.Request) {
			req.Item.Status.ProviderStatus = &runtime.RawExtension{Raw: installed}
			if !fired.Swap(true) {
				err := interrupt(client.ObjectKeyFromObject(req.Item), nil)
				interruptErr.Store(&err)
			}
		},
	})
	ctx := context.Background()
	// Managed by an execution: the job is handed over (a new generation
	// alone starts no job), so once interrupted nothing redoes the work.
	di := newItem(ns, "interrupted")
	di.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	handOver(g, di, "job-1", nil)

	g.Eventually(get(g, di), timeout, interval).Should(And(
		phase(lsv1alpha1.PhaseFailed), settled(),
		HaveField("Status.LastError.Reason", "Interrupted"),
		HaveField("Status.ProviderStatus", Not(BeNil())),
		HaveField("Status.ExportReference", Not(BeNil()))))
	cur := get(g, di)()
	g.Expect(interruptErr.Load()).NotTo(BeNil(), "the interrupt was written")
	g.Expect(*interruptErr.Load()).To(Succeed())
	g.Expect(cur.Status.ProviderStatus.Raw).To(MatchJSON(installed))
	g.Expect(cur.Status.ExportReference.Name).To(Equal(lib.ExportSecretName(di)))
	g.Expect(cur.Status.LastError.Codes).To(ConsistOf(lsv1alpha1.ErrorInterrupted), "the interrupter's outcome stands")
	g.Expect(cur.Status.JobIDFinished).To(Equal("job-1"))
	calls := 0
	for _, tr := range rec.Traces(ns, di.Name) {
		calls += strings.Count(tr+",", ",Reconcile,")
	}
	g.Expect(calls).To(Equal(1), "the item is not in a job any more: Reconcile ran once")

	g.Expect(env.Client.Delete(ctx, cur)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(rec.Traces(ns, di.Name)).To(ContainElement(ContainSubstring(",Delete")))
}

// TestDeletionDuringTheWorkKeepsTheRecord: the item is deleted while
// Reconcile works on it (the deletionTimestamp makes the status write
// conflict); the Delete that follows still gets what Reconcile installed.
func TestDeletionDuringTheWorkKeepsTheRecord(t *testing.T) {
	installed := []byte(`{"apiVersion":"example.org/v1","kind":"Status","installed":["cm-1"]}`)
	var (
		deleteErr atomic.Pointer[error]
		atDelete  atomic.Pointer[runtime.RawExtension]
	)
	ns, g := setup(t, &behaviour{
		onReconcile: func(req *lib.Request) {
			req.Item.Status.ProviderStatus = &runtime.RawExtension{Raw: installed}
			if deleteErr.Load() == nil {
				err := env.Client.Delete(context.Background(), req.Item.DeepCopy())
				deleteErr.Store(&err)
			}
		},
		onDelete: func(req *lib.Request) {
			ps := &runtime.RawExtension{}
			if req.Item.Status.ProviderStatus != nil {
				ps = req.Item.Status.ProviderStatus.DeepCopy()
			}
			atDelete.CompareAndSwap(nil, ps)
		},
	})
	ctx := context.Background()
	di := newItem(ns, "deleted")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(deleteErr.Load()).NotTo(BeNil(), "the item was deleted during Reconcile")
	g.Expect(*deleteErr.Load()).To(Succeed())
	g.Expect(atDelete.Load()).NotTo(BeNil(), "Delete ran")
	g.Expect(atDelete.Load().Raw).To(MatchJSON(installed), "Delete got what Reconcile installed")
}

// TestRecordOfAnotherWriterIsNotOverwritten: keeping the record after a
// conflict is a compare-and-swap per field: a providerStatus somebody else
// wrote since the deployer read the item is left as it is.
func TestRecordOfAnotherWriterIsNotOverwritten(t *testing.T) {
	installed := []byte(`{"apiVersion":"example.org/v1","kind":"Status","installed":["cm-1"]}`)
	foreign := []byte(`{"apiVersion":"example.org/v1","kind":"Status","installed":["other"]}`)
	var interruptErr atomic.Pointer[error]
	ns, g := setup(t, &behaviour{
		export: []byte(`{"k":"v"}`),
		onReconcile: func(req *lib.Request) {
			req.Item.Status.ProviderStatus = &runtime.RawExtension{Raw: installed}
			if interruptErr.Load() == nil {
				err := interrupt(client.ObjectKeyFromObject(req.Item), &runtime.RawExtension{Raw: foreign})
				interruptErr.Store(&err)
			}
		},
	})
	ctx := context.Background()
	di := newItem(ns, "foreign")
	di.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	handOver(g, di, "job-1", nil)

	// exportRef (unchanged by the other writer) is kept; providerStatus is not.
	g.Eventually(get(g, di), timeout, interval).Should(And(
		phase(lsv1alpha1.PhaseFailed), settled(),
		HaveField("Status.ExportReference", Not(BeNil()))))
	g.Expect(interruptErr.Load()).NotTo(BeNil())
	g.Expect(*interruptErr.Load()).To(Succeed())
	g.Expect(get(g, di)().Status.ProviderStatus.Raw).To(MatchJSON(foreign))
}
