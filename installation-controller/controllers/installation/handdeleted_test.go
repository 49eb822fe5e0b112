package installation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/controllers/installation"
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

// An execution Init deleted as an orphan (the blueprint renders no deploy
// items any more) is still on its way out when Init runs again after a
// wait (here for the name of a context copy): Init hands it the deletion
// and waits until it is gone, as for a sub-object deleted by hand, but
// Ready says it is not created again; it used to say "deleted by hand, to
// be gone before they are created again". Deterministic: the execution's
// deploy item is held (a finalizer of the test's) until Init has said so.
func TestOrphanedExecutionOnItsWayOutIsNotSaidToComeBack(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "xv"), Data: lsv1alpha1.NewAnyJSON([]byte(`"x"`))})
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "yv"), Data: lsv1alpha1.NewAnyJSON([]byte(`"y"`))})
	blueprint := func(items bool) map[string]string {
		bp := "imports:\n- name: x\n  type: data\n- name: y\n  type: data\n  required: false\n" +
			"subinstallations:\n- name: s\n  blueprint: {dir: s}\n  imports: {data: [{name: v, dataRef: x}]}\n"
		if items {
			bp += "deployExecutions:\n- name: default\n  type: GoTemplate\n  template: |\n    deployItems:\n" + indent(mockItem("item", ""), 4)
		}
		return map[string]string{"blueprint.yaml": bp, "s/blueprint.yaml": "imports:\n- name: v\n  type: data\n"}
	}
	root := newInstallation(ns, "root", blueprint(true), reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "x", DataRef: "xv"}}
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	items := &lsv1alpha1.DeployItemList{}
	g.Expect(env.Client.List(ctx, items, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.ManagedByExecutionLabel: "root"})).To(Succeed())
	g.Expect(items.Items).To(HaveLen(1))
	item := client.ObjectKeyFromObject(&items.Items[0])
	holdItem := func(hold bool) {
		g.Eventually(func() error {
			di := &lsv1alpha1.DeployItem{}
			if err := env.Client.Get(ctx, item, di); err != nil {
				return err
			}
			before := di.DeepCopy()
			if hold {
				controllerutil.AddFinalizer(di, holdFinalizer)
			} else {
				controllerutil.RemoveFinalizer(di, holdFinalizer)
			}
			return env.Client.Patch(ctx, di, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}, timeout, interval).Should(Succeed())
	}
	holdItem(true)

	// The next job renders no deploy items, and its new import y's context
	// copy has a name held by an object being deleted: Init deletes the
	// orphaned execution, then waits for the name.
	held := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: installation.ScopedName("root", "y"), OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	createGoing(g, held)
	root, _ = getInst(ns, "root")()
	first := root.Status.JobID
	root.Spec.Blueprint.Inline.Filesystem = blueprint(false)
	root.Spec.Imports.Data = append(root.Spec.Imports.Data, lsv1alpha1.DataImport{Name: "y", DataRef: "yv"})
	root.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(ctx, root)).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(HaveField("Status.JobID", Not(Equal(first))),
		waitsForName(lsv1alpha1.PhaseInit, "DataObject", ns, held.Name)), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(getExec(ns, "root")()).To(HaveField("DeletionTimestamp", Not(BeNil())), "the orphan is on its way out")

	// Once the name is free, Init waits for the orphan only.
	releaseHeld(g, held)
	want := "phase Init waits for execution root, deleted and no longer rendered by the blueprint, to be gone (they are not created again)"
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInit), WithTransform(readyOf, And(
		HaveField("Reason", "Waiting"), HaveField("Message", ContainSubstring(want))))), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(exists(ns, &lsv1alpha1.Execution{}, "root")()).To(BeTrue(), "held by its item")

	holdItem(false)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	_, err := getExec(ns, "root")()
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the orphan is gone and not created again: %v", err)
	for _, st := range rec.statuses("root") {
		if c := apimeta.FindStatusCondition(st.Status.Conditions, lsv1alpha1.ConditionReady); c != nil {
			g.Expect(c.Message).NotTo(ContainSubstring("deleted by hand"))
		}
	}
}
