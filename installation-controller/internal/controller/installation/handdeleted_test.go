package installation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// Sub-objects a blueprint renders that someone deleted by hand while the
// installation was idle wait for a deletion job only their parent hands
// over. The next job hands over its own, waits until they are gone - their
// deploy items uninstalled - and creates them again, rather than waiting in
// Init for ever ("still being deleted").
func TestSubObjectsDeletedByHandAreCreatedAgainByTheNextJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rootWithSubsAndExecution(g, ns, `["one","two"]`)

	exec, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	two, err := getInst(ns, "root-two")()
	g.Expect(err).NotTo(HaveOccurred())
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
// Ready says it is not created again, not "deleted by hand, to be gone
// before they are created again". Deterministic: the execution is held (a
// finalizer of the test's) until Init has said so.
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
	orphan, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	setHold(g, orphan, true)

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
	g.Expect(exists(ns, &lsv1alpha1.Execution{}, "root")()).To(BeTrue(), "held")

	setHold(g, orphan, false)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	_, err = getExec(ns, "root")()
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the orphan is gone and not created again: %v", err)
	for _, st := range rec.statuses("root") {
		g.Expect(readyMessage(&st)).NotTo(ContainSubstring("deleted by hand"))
	}
}

// update changes installation ns/name with mutate, read anew and retried
// while the controller's writes make it conflict.
func update(g Gomega, ns, name string, mutate func(*lsv1alpha1.Installation)) {
	g.Eventually(func() error {
		inst, err := getInst(ns, name)()
		if err != nil {
			return err
		}
		mutate(inst)
		return env.Client.Update(context.Background(), inst)
	}, timeout, interval).Should(Succeed())
}

// setHold adds (hold) or removes holdFinalizer on the object of key, which
// keeps it from going while the test holds it.
func setHold(g Gomega, obj client.Object, hold bool) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		before := obj.DeepCopyObject().(client.Object)
		if hold {
			controllerutil.AddFinalizer(obj, holdFinalizer)
		} else {
			controllerutil.RemoveFinalizer(obj, holdFinalizer)
		}
		return env.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}, timeout, interval).Should(Succeed())
}

// readyMessage is the message of an installation's Ready condition.
func readyMessage(i *lsv1alpha1.Installation) string {
	if c := readyOf(i); c != nil {
		return c.Message
	}
	return ""
}

// A sub-installation deleted by hand while it runs its parent's job runs
// that job to its end (here it ends Failed), and the parent's job does not
// finish before it: Ready says it waits for the sub-installation "(deleted
// by hand)", and the job then fails with the sub-installation's cause. The
// next job hands it its deletion and creates it again. Were a
// sub-installation being deleted left out of Progressing, the parent's job
// would succeed while the sub-installation still ran it, and the parent's
// next job would hand it a new job ID in the middle of that flow.
// Deterministic: the sub-installation's execution stays Progressing (mock
// phase) until the test interrupts it.
func TestSubInstallationDeletedByHandMidJobIsWaitedFor(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)
	phase := createRootWithSubItemField(g, ns, "phase", `"Progressing"`)
	var root *lsv1alpha1.Installation
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(WithTransform(readyMessage, ContainSubstring("sub-installation root-s to finish")),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	root, _ = getInst(ns, "root")()
	first := root.Status.JobID
	sub, err := getInst(ns, "root-s")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.Status).To(And(HaveField("JobID", first), HaveField("Phase", lsv1alpha1.PhaseProgressing)))

	g.Expect(env.Client.Delete(ctx, sub)).To(Succeed())
	g.Eventually(func() (string, error) {
		i, err := getInst(ns, "root")()
		if err == nil && i.Status.JobIDFinished == first {
			StopTrying(fmt.Sprintf("job %s ended %s while sub-installation root-s still ran it: %s", first, i.Status.Phase, lastError(i))).Now()
		}
		return readyMessage(i), err
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("phase Progressing waits for sub-installation root-s (deleted by hand) to finish"))
	g.Expect(getInst(ns, "root-s")()).To(HaveField("Status", And(HaveField("JobID", first), HaveField("Phase", lsv1alpha1.PhaseProgressing))))

	// The sub-installation's job ends (Failed: interrupted); then the
	// parent's job ends with its cause.
	annotate(g, sub, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationInterrupt))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	root, _ = getInst(ns, "root")()
	g.Expect(root.Status.JobIDFinished).To(Equal(first))
	g.Expect(root.Status.LastError).To(And(HaveField("Reason", installation.ReasonSubObjectsFailed), HaveField("Message", ContainSubstring("sub-installation root-s (Failed)"))))
	subDone := rec.index(func(i *lsv1alpha1.Installation) bool { return i.Name == "root-s" && i.Status.JobIDFinished == first })
	rootDone := rec.index(func(i *lsv1alpha1.Installation) bool { return i.Name == "root" && i.Status.JobIDFinished == first })
	g.Expect(subDone).To(BeNumerically(">=", 0))
	g.Expect(rootDone).To(BeNumerically(">", subDone), "the parent's job finished after the sub-installation's")

	// The next job hands it its deletion, waits until it is gone and
	// creates it again.
	rerunRecreatesSub(g, ns, phase, `"Succeeded"`, root, first, sub.UID)
}

// A parent never hands a job to a sub-installation running another one.
// Here a job's Init hands its deletion to a sub-installation deleted by
// hand, and then fails (the blueprint was broken meanwhile) while that
// deletion still runs (its execution held). The next job's Init waits for
// the sub-installation to finish that deletion (Ready says so) instead of
// handing it the new job ID in the middle of it, then creates it again:
// handed over at once, the sub-installation would go on in phase Deleting
// under a job its own sub-objects never got.
func TestHandOverWaitsForASubInstallationRunningAnotherJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rootWithSubsAndExecution(g, ns, `["one"]`)
	held, err := getExec(ns, "root-one")()
	g.Expect(err).NotTo(HaveOccurred())
	setHold(g, held, true)
	one, err := getInst(ns, "root-one")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, one)).To(Succeed())

	// Job 2 hands it its deletion, which waits for its held execution.
	root, _ := getInst(ns, "root")()
	first := root.Status.JobID
	annotate(g, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(HaveField("Status.JobID", Not(Equal(first))),
		WithTransform(readyMessage, ContainSubstring("installation root-one, deleted by hand, to be gone"))), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	root, _ = getInst(ns, "root")()
	second := root.Status.JobID
	g.Eventually(getInst(ns, "root-one"), timeout, interval).Should(HaveField("Status", And(HaveField("JobID", second), HaveField("Phase", lsv1alpha1.PhaseDeleting))))

	// Job 2 fails in Init while the deletion runs.
	good := root.Spec.Blueprint.Inline.Filesystem["blueprint.yaml"]
	update(g, ns, "root", func(i *lsv1alpha1.Installation) {
		i.Spec.Blueprint.Inline.Filesystem["blueprint.yaml"] = "subinstallations: {not: a list"
	})
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed), HaveField("Status.JobID", second)))

	// Job 3 waits for the deletion of job 2 to end. (The failed job's
	// status is followed by the hint that a new spec needs the annotation:
	// the edit is retried on the newer copy.)
	update(g, ns, "root", func(i *lsv1alpha1.Installation) {
		i.Spec.Blueprint.Inline.Filesystem["blueprint.yaml"] = good
		i.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	})
	want := fmt.Sprintf("phase Init waits for sub-installation root-one to finish job %s, which it is running (phase Deleting), before it is handed this one", second)
	g.Eventually(func() (string, error) {
		if o, err := getInst(ns, "root-one")(); err == nil && o.Status.JobID != second {
			StopTrying(fmt.Sprintf("root-one was handed job %s while it ran job %s in phase %s", o.Status.JobID, second, o.Status.Phase)).Now()
		}
		i, err := getInst(ns, "root")()
		return readyMessage(i), err
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring(want))
	root, _ = getInst(ns, "root")()
	third := root.Status.JobID
	g.Expect(third).NotTo(Equal(second))
	g.Expect(getInst(ns, "root-one")()).To(HaveField("Status", And(HaveField("JobID", second), HaveField("Phase", lsv1alpha1.PhaseDeleting))))

	setHold(g, held, false)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", third)),
		func() string { i, _ := getInst(ns, "root")(); return fmt.Sprint(lastError(i), i.Status.Conditions) })
	newOne, err := getInst(ns, "root-one")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newOne.UID).NotTo(Equal(one.UID))
	g.Expect(newOne.Status).To(And(HaveField("JobIDFinished", third), HaveField("Phase", lsv1alpha1.PhaseSucceeded)))
}

// A sub-installation deleted by hand while it runs its parent's job ends
// that job DeletedDuringJob, but no deletion job follows on its own: the
// parent stays, and its next job (for a root, only the reconcile
// annotation starts one) hands the sub-installation its deletion. Its
// message, and the root's SubObjectsFailed quoting it, said "the deletion
// job follows" while `kubectl delete` hung; they now say what runs the
// deletion and how to start it, and doing so deletes the sub-installation
// and the tree recovers.
func TestSubInstallationDeletedMidJobSaysItsParentsNextJobDeletesIt(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	delay := createRootWithSubItemField(g, ns, "delay", `"8s"`)
	var root *lsv1alpha1.Installation
	g.Eventually(getInst(ns, "root-s"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	sub, err := getInst(ns, "root-s")()
	g.Expect(err).NotTo(HaveOccurred())
	first := sub.Status.JobID
	g.Expect(env.Client.Delete(ctx, sub)).To(Succeed())

	advice := "no deletion job follows on its own: its deletion runs in the next job of its parent root (which creates it again while the blueprint renders it): " +
		"add the landscaper.gardener.cloud/operation=reconcile annotation to the root installation root"
	g.Eventually(getInst(ns, "root-s"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	sub, _ = getInst(ns, "root-s")()
	g.Expect(sub.Status.JobIDFinished).To(Equal(first))
	g.Expect(sub.Status.LastError).To(And(HaveField("Reason", installation.ReasonDeletedDuringJob),
		HaveField("Message", And(ContainSubstring(advice), Not(ContainSubstring("the deletion job follows"))))))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	root, _ = getInst(ns, "root")()
	g.Expect(root.Status.JobIDFinished).To(Equal(first))
	g.Expect(root.Status.LastError).To(And(HaveField("Reason", installation.ReasonSubObjectsFailed),
		HaveField("Message", And(ContainSubstring("sub-installation root-s (Failed); cause: sub-installation root-s: DeletedDuringJob"), ContainSubstring(advice)))))
	// What the messages say: nothing deletes it on its own.
	g.Consistently(getInst(ns, "root-s")).WithTimeout(2 * time.Second).WithPolling(interval).Should(And(
		HaveField("UID", sub.UID), HaveField("Status.JobID", first), HaveField("Status.Phase", lsv1alpha1.PhaseFailed)))

	// The advice works: the root's next job deletes it and creates it again.
	rerunRecreatesSub(g, ns, delay, `"0s"`, root, first, sub.UID)
}

// createRootWithSubItemField creates a DataObject field holding value (JSON)
// and a root installation "root" importing it, whose one sub-installation
// "root-s" passes it on to its mock item's config field of that name (say
// phase, to hold the item Progressing, or delay). It returns the DataObject.
func createRootWithSubItemField(g Gomega, ns, field, value string) *lsv1alpha1.DataObject {
	do := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, field), Data: lsv1alpha1.NewAnyJSON([]byte(value))}
	create(g, do)
	imports := "imports:\n- name: " + field + "\n  type: data\n"
	fs := map[string]string{
		"blueprint.yaml": imports + "subinstallations:\n- name: s\n  blueprint: {dir: s}\n  imports: {data: [{name: " + field +
			", dataRef: " + field + "}]}\n",
		"s/blueprint.yaml": imports + simpleBlueprint("      " + field + ": {{ .imports." + field + " }}\n")["blueprint.yaml"],
	}
	root := newInstallation(ns, "root", fs, reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: field, DataRef: field}}
	create(g, root)
	return do
}

// rerunRecreatesSub sets field (createRootWithSubItemField's DataObject) to
// value (JSON) and starts a new job of root with the reconcile annotation:
// the job (not first) succeeds, and root-s, deleted and created again (not
// the object oldSub), finished it Succeeded.
func rerunRecreatesSub(g Gomega, ns string, field *lsv1alpha1.DataObject, value string, root *lsv1alpha1.Installation, first string, oldSub types.UID) {
	field.Data = lsv1alpha1.NewAnyJSON([]byte(value))
	g.Expect(env.Client.Update(context.Background(), field)).To(Succeed())
	annotate(g, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return fmt.Sprint(lastError(i), i.Status.Conditions) })
	root, _ = getInst(ns, "root")()
	newSub, err := getInst(ns, "root-s")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newSub.UID).NotTo(Equal(oldSub))
	g.Expect(newSub.Status).To(And(HaveField("JobIDFinished", root.Status.JobID), HaveField("Phase", lsv1alpha1.PhaseSucceeded)))
}
