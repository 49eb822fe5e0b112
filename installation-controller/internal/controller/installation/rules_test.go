package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// slow is a mock item configuration that stays Progressing for a while, so
// a test can act while the job runs.
const slow = "      delay: 3s\n"

// A reconcile annotation during a running job waits for it, then starts
// the next job.
func TestFollowUpJobQueuedBehindRunningJob(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint(slow), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	first, _ := getInst(ns, "root")()
	annotate(g, first, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	// While the first job runs, the annotation stays and the job ID too.
	g.Consistently(getInst(ns, "root"), "1s", interval).Should(And(
		HaveField("Status.JobID", first.Status.JobID),
		HaveField("ObjectMeta.Annotations", HaveKey(lsv1alpha1.OperationAnnotation))))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(
		finishedIn(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobID", Not(Equal(first.Status.JobID))),
		HaveField("ObjectMeta.Annotations", Not(HaveKey(lsv1alpha1.OperationAnnotation)))))
}

// A reconcile annotation on a sub-installation has no effect and is removed.
func TestReconcileAnnotationOnSubInstallationIsRemoved(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	root := newInstallation(ns, "root", treeFS(), reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	sub, _ := getInst(ns, "root-a")()
	job := sub.Status.JobID
	annotate(g, sub, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root-a"), timeout, interval).Should(HaveField("ObjectMeta.Annotations", Not(HaveKey(lsv1alpha1.OperationAnnotation))))
	g.Consistently(getInst(ns, "root-a"), "1s", interval).Should(HaveField("Status.JobID", job))
}

// A spec change during a job fails it at Completing.
func TestSpecChangedDuringJobFails(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint(slow), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	inst, _ := getInst(ns, "root")()
	g.Expect(env.Client.Patch(context.Background(), inst, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"blueprint":{"inline":{"filesystem":{"notes.txt":"changed"}}}}}`)))).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.LastError.Reason", "SpecChanged"), HaveField("Status.LastError.Operation", "Completing")))
}

// An import change during a job fails it at Completing.
func TestImportsChangedDuringJobFails(t *testing.T) {
	ns, g := setup(t)
	do := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`1`))}
	create(g, do)
	inst := newInstallation(ns, "root", simpleBlueprint(slow), reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "in", DataRef: "in"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	do.Data = lsv1alpha1.NewAnyJSON([]byte(`2`))
	g.Expect(env.Client.Update(context.Background(), do)).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.LastError.Reason", "ImportsChanged")))
	// A new job takes the new imports into account.
	inst, _ = getInst(ns, "root")()
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.LastError", BeNil())))
}

// An interrupt is handed down the tree; the items fail and the job ends.
func TestInterruptIsPropagated(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint("      phase: Progressing\n"), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	inst, _ := getInst(ns, "root")()
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationInterrupt))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("ObjectMeta.Annotations", Not(HaveKey(lsv1alpha1.OperationAnnotation)))))
	inst, _ = getInst(ns, "root")()
	exec, _ := getExec(ns, "root")()
	g.Expect(exec.Status.JobIDFinished).To(Equal(inst.Status.JobID))
	g.Expect(exec.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(exec.Status.LastError).To(HaveField("Reason", lsv1alpha1.ReasonInterrupted))
	g.Expect(exec.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
}

// Deleting a root runs the deletion flow and removes the whole tree.
func TestDeletionFlow(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	root := newInstallation(ns, "root", treeFS(), reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(context.Background(), root)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
	for _, n := range []string{"root-a", "root-b"} {
		g.Expect(gone(getInst(ns, n))()).To(BeTrue(), n)
	}
	g.Expect(rec.phases("root")).To(HaveExactElements(lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseSucceeded,
		lsv1alpha1.PhaseInitDelete, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting))
	g.Expect(rec.phases("root-b")).To(ContainElements(lsv1alpha1.PhaseInitDelete, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting))
	execs := &lsv1alpha1.ExecutionList{}
	g.Expect(env.Client.List(context.Background(), execs, client.InNamespace(ns))).To(Succeed())
	g.Expect(execs.Items).To(BeEmpty())
	// The context objects (the root's imports for its children, the
	// children's exports) went with it.
	dos := &lsv1alpha1.DataObjectList{}
	g.Expect(env.Client.List(context.Background(), dos, client.InNamespace(ns), client.HasLabels{"installation.terrace.dev/context"})).To(Succeed())
	g.Expect(dos.Items).To(BeEmpty())
}

// predecessorAndSuccessor creates root installations p (exporting p-out)
// and s (importing it); s gets no annotation: p triggers it.
func predecessorAndSuccessor(g Gomega, ns string, pAnnotations ...string) {
	pfs := map[string]string{"blueprint.yaml": `exports:
- name: out
  type: data
exportExecutions:
- name: e
  type: GoTemplate
  template: |
    exports:
      out: {{ .installation.name }}
`}
	p := newInstallation(ns, "p", pfs, append(pAnnotations, reconcileAnnotation...)...)
	p.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	s := newInstallation(ns, "s", simpleBlueprint(""))
	s.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "in", DataRef: "p-out"}}
	create(g, s)
	create(g, p)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	// The root successor was triggered with the reconcile annotation.
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
}

// Deletion waits while successors exist.
func TestDeletionWaitsForSuccessors(t *testing.T) {
	ns, g := setup(t)
	predecessorAndSuccessor(g, ns)
	p, _ := getInst(ns, "p")()
	g.Expect(env.Client.Delete(context.Background(), p)).To(Succeed())
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseInitDelete))
	g.Consistently(getInst(ns, "p"), "2s", interval).Should(inPhase(lsv1alpha1.PhaseInitDelete))
	s, _ := getInst(ns, "s")()
	g.Expect(env.Client.Delete(context.Background(), s)).To(Succeed())
	g.Eventually(gone(getInst(ns, "s")), timeout, interval).Should(BeTrue())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())
}

// delete-ignore-successors skips the wait.
func TestDeleteIgnoreSuccessors(t *testing.T) {
	ns, g := setup(t)
	predecessorAndSuccessor(g, ns, lsv1alpha1.DeleteIgnoreSuccessorsAnnotation, "true")
	p, _ := getInst(ns, "p")()
	g.Expect(env.Client.Delete(context.Background(), p)).To(Succeed())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())
	g.Expect(gone(getInst(ns, "s"))()).To(BeFalse())
}

// installedItemFS renders a mock item on Target "cluster" that records a
// provider status, as a deployer records what it installed: once the Target
// is gone its uninstall fails (an item that installed nothing is deleted
// without its Target).
func installedItemFS() map[string]string {
	return map[string]string{"blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      target:
        name: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          apiVersion: example.org/v1
          kind: Installed
`}
}

// rootWhoseTargetWent creates root (with annotations) from installedItemFS,
// waits for its job to succeed, deletes the Target, then deletes root: the
// uninstall of its item now fails for want of the Target.
func rootWhoseTargetWent(g Gomega, ns string, annotations ...string) {
	ctx := context.Background()
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	create(g, newInstallation(ns, "root", installedItemFS(), append(reconcileAnnotation, annotations...)...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster")})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, &lsv1alpha1.Target{}))
	}, timeout, interval).Should(BeTrue())
	inst, _ := getInst(ns, "root")()
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
}

// A failed deletion ends DeleteFailed; the reconcile annotation retries it.
func TestDeleteFailedAndRetry(t *testing.T) {
	ns, g := setup(t)
	rootWhoseTargetWent(g, ns)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseDeleteFailed),
		HaveField("Status.LastError.Reason", "SubObjectsDeleteFailed")))
	failedJob := func() string { i, _ := getInst(ns, "root")(); return i.Status.JobID }()
	// Stays DeleteFailed without a request.
	g.Consistently(getInst(ns, "root"), "1s", interval).Should(HaveField("Status.JobID", failedJob))
	// Fix the cause, then retry.
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	inst, _ := getInst(ns, "root")()
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
}

// delete-without-uninstall reaches the execution: one whose items' uninstall
// would fail (their Target is gone) goes anyway.
func TestDeleteWithoutUninstall(t *testing.T) {
	ns, g := setup(t)
	rootWhoseTargetWent(g, ns, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
	execs := &lsv1alpha1.ExecutionList{}
	g.Expect(env.Client.List(context.Background(), execs, client.InNamespace(ns))).To(Succeed())
	g.Expect(execs.Items).To(BeEmpty())
}

// A root installation importing another root's export waits in Init (Ready
// reason Waiting says for what) until that predecessor's job finished.
func TestRootWaitsForRunningPredecessor(t *testing.T) {
	ns, g := setup(t)
	// Long enough for s to be seen waiting on a loaded machine.
	pfs := simpleBlueprint("      delay: 8s\n")
	pfs["blueprint.yaml"] += `exports:
- name: out
  type: data
exportExecutions:
- name: e
  type: GoTemplate
  template: |
    exports:
      out: done
`
	p := newInstallation(ns, "p", pfs, reconcileAnnotation...)
	p.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	create(g, p)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing))
	s := newInstallation(ns, "s", simpleBlueprint(""), reconcileAnnotation...)
	s.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "in", DataRef: "p-out"}}
	create(g, s)
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInit),
		HaveField("Status.Conditions", ContainElement(And(HaveField("Reason", "Waiting"), HaveField("Message", ContainSubstring("predecessors p to finish")))))))
	pDone, _ := getInst(ns, "p")()
	g.Expect(pDone.Status.JobIDFinished).NotTo(Equal(pDone.Status.JobID), "p still runs while s waits")
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(getInst(ns, "p")()).To(finishedIn(lsv1alpha1.PhaseSucceeded))
}
