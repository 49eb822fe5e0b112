package installation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Sub-objects a blueprint renders that someone deleted by hand while the
// installation was idle wait for a deletion job only their parent hands
// over. The next job hands over its own, waits until they are gone - their
// deploy items uninstalled - and creates them again; before, it waited in
// Init for ever ("still being deleted").
func TestSubObjectsDeletedByHandAreCreatedAgainByTheNextJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rootWithSubsAndExecution(g, ns, `["one","two"]`)

	exec, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	two, err := getInst(ns, "root-two")()
	g.Expect(err).NotTo(HaveOccurred())
	items := &lsv1alpha1.DeployItemList{}
	g.Expect(env.Client.List(ctx, items, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.ManagedByExecutionLabel: "root"})).To(Succeed())
	g.Expect(items.Items).To(HaveLen(1))
	oldItem := items.Items[0].UID
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, two)).To(Succeed())
	// Both wait for their parent (finalizers kept).
	g.Eventually(getExec(ns, "root"), timeout, interval).Should(HaveField("DeletionTimestamp", Not(BeNil())))
	g.Eventually(getInst(ns, "root-two"), timeout, interval).Should(HaveField("DeletionTimestamp", Not(BeNil())))

	root, _ := getInst(ns, "root")()
	first := root.Status.JobID
	annotate(g, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return fmt.Sprint(lastError(i), i.Status.Conditions) })
	root, _ = getInst(ns, "root")()

	// Created again, and run with the new job.
	oldExec := exec.UID
	exec, err = getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.UID).NotTo(Equal(oldExec))
	g.Expect(exec.DeletionTimestamp).To(BeNil())
	g.Expect(exec.Status.JobIDFinished).To(Equal(root.Status.JobID))
	g.Expect(exec.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	newTwo, err := getInst(ns, "root-two")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newTwo.UID).NotTo(Equal(two.UID))
	g.Expect(newTwo.DeletionTimestamp).To(BeNil())
	g.Expect(newTwo.Status).To(And(HaveField("JobIDFinished", root.Status.JobID), HaveField("Phase", lsv1alpha1.PhaseSucceeded)))
	// The deleted execution's deploy item was uninstalled, not adopted.
	g.Expect(env.Client.List(ctx, items, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.ManagedByExecutionLabel: "root"})).To(Succeed())
	g.Expect(items.Items).To(HaveLen(1))
	g.Expect(items.Items[0].UID).NotTo(Equal(oldItem))
}

// A hand-deleted sub-installation that a sibling imports from does not wait
// for that sibling (which waits for this job) to go: the job marks it
// delete-ignore-successors, as it marks orphans, before handing it the
// deletion, then creates it again and runs both.
func TestSubInstallationDeletedByHandThatASiblingImportsFrom(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	root := newInstallation(ns, "root", treeFS(), reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	a, err := getInst(ns, "root-a")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, a)).To(Succeed())
	root, _ = getInst(ns, "root")()
	first := root.Status.JobID
	annotate(g, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return fmt.Sprint(lastError(i), i.Status.Conditions) })
	root, _ = getInst(ns, "root")()
	newA, err := getInst(ns, "root-a")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newA.UID).NotTo(Equal(a.UID))
	for _, name := range []string{"root-a", "root-b"} {
		sub, err := getInst(ns, name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sub.Status).To(And(HaveField("JobIDFinished", root.Status.JobID), HaveField("Phase", lsv1alpha1.PhaseSucceeded)), name)
	}
}

// A hand-deleted sub-installation waits for its parent's deletion job. When
// the parent then goes without handing one over (its finalizer removed by
// hand), its deletion wakes the child, which runs its own deletion job -
// its execution and deploy items included - and no finalizer is left.
func TestHandDeletedSubInstallationWhoseParentWentDeletesItself(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rootWithSubsAndExecution(g, ns, `["one"]`)
	one, err := getInst(ns, "root-one")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, one)).To(Succeed())
	// It waits: its parent is idle.
	g.Consistently(gone(getInst(ns, "root-one"))).WithTimeout(time.Second).WithPolling(interval).Should(BeFalse())

	root, err := getInst(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Patch(ctx, root, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root-one"))).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(func() bool {
		_, err := getExec(ns, "root-one")()
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the sub-installation's execution was deleted by its own deletion job")
}
