package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// holdFinalizer keeps an object the tests delete from going until they
// release it (releaseHeld): it stands for anyone's finalizer still at work.
const holdFinalizer = "test.terrace.dev/hold"

// goneOwner is a controller reference to an installation "old" that does
// not exist: an object of a deleted installation that garbage collection
// (envtest runs none) has not removed yet.
var goneOwner = metav1.OwnerReference{APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "Installation", Name: "old",
	UID: "00000000-0000-0000-0000-000000000001", Controller: ptrTo(true)}

// createGoing creates obj held by holdFinalizer and deletes it: it is being
// deleted until releaseHeld.
func createGoing(g Gomega, obj client.Object) {
	obj.SetFinalizers([]string{holdFinalizer})
	create(g, obj)
	g.Expect(env.Client.Delete(context.Background(), obj)).To(Succeed())
}

// releaseHeld removes the finalizer of an object createGoing made, which
// then goes.
func releaseHeld(g Gomega, obj client.Object) {
	g.Expect(env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
}

// waitsForName matches an installation whose running job waits in phase
// for the name of kind ns/name to be free: Ready Unknown with reason
// Waiting saying so, no lastError (a wait is no error), the job not ended.
func waitsForName(phase lsv1alpha1.Phase, kind, ns, name string) types.GomegaMatcher {
	return And(inPhase(phase), HaveField("Status.LastError", BeNil()),
		WithTransform(func(i *lsv1alpha1.Installation) bool { return i.Status.JobIDFinished != i.Status.JobID }, BeTrue()),
		WithTransform(readyOf, And(Not(BeNil()), HaveField("Status", metav1.ConditionUnknown), HaveField("Reason", "Waiting"),
			HaveField("Message", And(ContainSubstring("phase "+string(phase)+" waits for "+kind+" "+ns+"/"+name+" to go"),
				ContainSubstring("once it is gone"))))))
}

// A job whose export or context copy names a DataObject or Target on its
// way out (being deleted, or left by an installation that is gone for
// garbage collection to delete) waits for it to go: no failed reconcile (no
// "Reconciler error", retried with the controller's back-off, up to about 16
// minutes apart, and logged on every retry; no TransientError), but the
// Ready condition says what the job waits for, with one Warning event
// ExportNameTaken and one info line. The object's deletion wakes the job
// through the watch of DataObjects and Targets (the suite's re-checks never
// fire in time), and the job writes its object and succeeds. Here: a root's
// export DataObject being deleted, a root's export Target of a gone
// installation (waiting in Completing), and a parent's context copy being
// deleted (waiting in Init, before its sub-installations get the job; no
// index of exports reaches a context copy's writer).
func TestExportNameWaitIsNoErrorAndTheDeletionWakesTheJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)

	heldData := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "exp-out"), Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	createGoing(g, heldData)
	exp := newInstallation(ns, "exp", exportingBlueprint("new"), reconcileAnnotation...)
	exp.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "exp-out"}}
	create(g, exp)

	left := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tgt-cl", OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType}}
	create(g, left)
	tgt := newInstallation(ns, "tgt", exportingBlueprint("new"), reconcileAnnotation...)
	tgt.Spec.Exports.Targets = []lsv1alpha1.TargetExport{{Name: "cl", Target: "tgt-cl"}}
	create(g, tgt)

	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`"from-p"`))})
	heldCopy := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p.x", OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	createGoing(g, heldCopy)
	p := newInstallation(ns, "p", nil, reconcileAnnotation...)
	movingValueSpec(p, true, false)
	create(g, p)

	cases := []struct {
		inst, kind, name string
		phase            lsv1alpha1.Phase
	}{
		{"exp", "DataObject", "exp-out", lsv1alpha1.PhaseCompleting},
		{"tgt", "Target", "tgt-cl", lsv1alpha1.PhaseCompleting},
		{"p", "DataObject", "p.x", lsv1alpha1.PhaseInit},
	}
	const waitLine = "job waits for a DataObject or Target name to be free"
	for _, c := range cases {
		g.Eventually(getInst(ns, c.inst), timeout, interval).Should(waitsForName(c.phase, c.kind, ns, c.name),
			func() string { i, _ := getInst(ns, c.inst)(); return lastError(i) })
		g.Eventually(func() []string { return logLines(ns, c.inst, waitLine) }, timeout, interval).Should(HaveLen(1), "the wait is logged")
	}
	g.Eventually(warningEvents(ctx, ns, "ExportNameTaken"), timeout, interval).Should(ConsistOf("exp", "tgt", "p"))
	g.Expect(gone(getInst(ns, "p-b"))()).To(BeFalse(), "p's sub-installations exist")
	b, _ := getInst(ns, "p-b")()
	g.Expect(b.Status.JobID).To(BeEmpty(), "no sub-installation gets the job before its parent's context is written")

	releaseHeld(g, heldData)
	g.Expect(env.Client.Delete(ctx, left)).To(Succeed())
	releaseHeld(g, heldCopy)
	owners := map[string]string{"exp": "exp-out", "tgt": "tgt-cl", "p": "p.x"}
	for _, c := range cases {
		g.Eventually(getInst(ns, c.inst), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.LastError", BeNil())),
			func() string { i, _ := getInst(ns, c.inst)(); return lastError(i) })
		inst, _ := getInst(ns, c.inst)()
		var obj client.Object = &lsv1alpha1.DataObject{}
		if c.kind == "Target" {
			obj = &lsv1alpha1.Target{}
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: owners[c.inst]}, obj)).To(Succeed())
		g.Expect(obj.GetOwnerReferences()).To(HaveExactElements(And(HaveField("UID", inst.UID), HaveField("Controller", HaveValue(BeTrue())))),
			"%s %s is written anew by %s", c.kind, c.name, c.inst)
		g.Expect(logLines(ns, c.inst, "Reconciler error")).To(BeEmpty(), "waiting is no reconcile error")
		g.Expect(logLines(ns, c.inst, waitLine)).To(HaveLen(1), "logged once, not on every reconcile")
		// Once the job went on, Ready no longer says it waits for the name
		// (see TestReadyNoLongerSaysWaitingOnceTheWaitIsOver).
		for _, st := range rec.statuses(c.inst) {
			if st.Status.Phase != c.phase && readyOf(&st) != nil {
				g.Expect(readyOf(&st)).To(Not(HaveField("Message", ContainSubstring("waits for "+c.kind))), "%s in phase %s", c.inst, st.Status.Phase)
			}
		}
	}
	owner, value := controlledBy(g, ns, "p.x")
	g.Expect(owner).To(Equal("p"))
	g.Expect(value).To(Equal(`"from-p"`))
	g.Eventually(getInst(ns, "p-b"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), "the sub-installations get the job once the copy is written")
}

// Once a phase's wait is over, the Ready condition no longer says it waits,
// in every status written after it, even when the phase the job goes on to
// runs only in the next reconcile, and its observedGeneration is the
// installation's. Here: a root being deleted waits in InitDelete for its
// successor to go (as a job waits for a name: see above), then deletes its
// execution, so TriggerDelete waits for the next reconcile; the status
// showing TriggerDelete does not keep "phase InitDelete waits for successors
// s to be deleted first" until Deleting says what it waits for.
func TestReadyNoLongerSaysWaitingOnceTheWaitIsOver(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)
	fs := simpleBlueprint("")
	fs["blueprint.yaml"] += `exports:
- name: out
  type: data
exportExecutions:
- name: e
  type: GoTemplate
  template: |
    exports:
      out: x
`
	p := newInstallation(ns, "p", fs, reconcileAnnotation...)
	p.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	s := newInstallation(ns, "s", simpleBlueprint(""))
	s.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "in", DataRef: "p-out"}}
	create(g, s)
	create(g, p)
	g.Eventually(getInst(ns, "s"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(getExec(ns, "p")()).To(HaveField("Status.Phase", lsv1alpha1.PhaseSucceeded), "p has an execution to delete")

	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInitDelete),
		WithTransform(readyOf, HaveField("Message", "phase InitDelete waits for successors s to be deleted first"))))
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())

	after := 0
	for _, st := range rec.statuses("p") {
		if st.Status.Phase != lsv1alpha1.PhaseTriggerDelete && st.Status.Phase != lsv1alpha1.PhaseDeleting {
			continue
		}
		after++
		g.Expect(readyOf(&st)).To(And(Not(HaveField("Message", ContainSubstring("phase InitDelete waits"))),
			HaveField("ObservedGeneration", st.Generation)), "Ready in phase %s", st.Status.Phase)
	}
	g.Expect(rec.phases("p")).To(ContainElement(lsv1alpha1.PhaseTriggerDelete), "the status showed TriggerDelete on its own")
	g.Expect(after).To(BeNumerically(">", 0))
}

// readyOf is the Ready condition of an installation (nil: none).
func readyOf(i *lsv1alpha1.Installation) *metav1.Condition {
	return apimeta.FindStatusCondition(i.Status.Conditions, lsv1alpha1.ConditionReady)
}
