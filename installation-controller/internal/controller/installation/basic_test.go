package installation_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// A root installation with one mock item walks the whole installation flow.
// The phases that need no waiting run in one reconcile with one status
// write: a watcher sees the job's start together with the wait for the
// execution (Progressing), and the end; Init, CleanupOrphaned, ObjectsCreated
// and Completing ran in between (the execution got the job, the Ready condition and the
// exports are the evidence).
func TestRootJobWalksEveryPhase(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	inst := newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...)
	create(g, inst)

	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	got, _ := getInst(ns, "root")()
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation), "the reconcile annotation is consumed")
	g.Expect(got.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady), HaveField("Reason", "Succeeded"))))
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	g.Expect(got.Status.ImportsHash).NotTo(BeEmpty())
	g.Expect(got.Status.ExecutionReference).NotTo(BeNil())
	g.Expect(got.Status.Conditions).To(ContainElement(And(
		HaveField("Type", lsv1alpha1.ConditionReady), HaveField("Status", BeEquivalentTo("True")), HaveField("ObservedGeneration", got.Generation))))
	// Init, CleanupOrphaned and ObjectsCreated need no waiting: they share
	// the job start's status write with Progressing.
	g.Eventually(func() []lsv1alpha1.Phase { return rec.phases("root") }, timeout, interval).Should(Equal([]lsv1alpha1.Phase{
		lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseSucceeded,
	}))
	g.Expect(got.Annotations).To(HaveKeyWithValue(installation.StartedJobAnnotation, got.Status.JobID),
		"the consumed annotation leaves the record of the job it started")

	exec, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.Status.JobID).To(Equal(got.Status.JobID), "the job ID is handed to the execution")
	g.Expect(exec.Status.JobIDFinished).To(Equal(got.Status.JobID))
	g.Expect(exec.Spec.DeployItems).To(HaveLen(1))
}

// A reconcile annotation consumed for a job whose start never reached the
// status (the controller died between its metadata patch and its status
// write) is not lost: the started-job record resumes that very job.
func TestLostJobStartIsResumed(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint("")))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(HaveField("Finalizers", ContainElement(lsv1alpha1.Finalizer)))
	inst, _ := getInst(ns, "root")()
	g.Expect(inst.Status.JobID).To(BeEmpty())
	// What the controller writes when it consumes the annotation of a new
	// root: the job derived from the status it read (no job yet).
	started := jobid.Derive(string(inst.UID), "", "", "false", strconv.FormatInt(inst.Generation, 10))
	annotate(g, inst, installation.StartedJobAnnotation, started)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", started)))

	// A record that does not follow from the status (here: the job that
	// just finished) starts nothing.
	inst, _ = getInst(ns, "root")()
	annotate(g, inst, installation.StartedJobAnnotation, jobid.Derive("some", "other", "state"))
	g.Consistently(getInst(ns, "root"), "2s", interval).Should(HaveField("Status.JobID", started))
}

// A start consumed before the spec was edited (the edit raced the consume,
// and the status write that would have recorded the start never happened)
// is resumed, under the ID of the spec it runs now: the record follows that
// job, so its end does not count as a lost start again.
func TestLostJobStartOfAnEarlierGenerationIsResumedAsTheCurrentOne(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint("")))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(HaveField("Finalizers", ContainElement(lsv1alpha1.Finalizer)))
	inst, _ := getInst(ns, "root")()
	g.Expect(inst.Status.JobID).To(BeEmpty())
	// One update: the record of a start consumed at this generation, and
	// the spec edit that followed it.
	inst.Annotations = map[string]string{installation.StartedJobAnnotation: jobid.Derive(string(inst.UID), "", "", "false", strconv.FormatInt(inst.Generation, 10))}
	inst.Spec.Blueprint.Inline.Filesystem["notes.txt"] = "edited"
	g.Expect(env.Client.Update(context.Background(), inst)).To(Succeed())
	current := jobid.Derive(string(inst.UID), "", "", "false", strconv.FormatInt(inst.Generation, 10))
	g.Expect(inst.Generation).To(BeNumerically("==", 2))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobID", current), HaveField("Status.ObservedGeneration", inst.Generation),
		HaveField("Annotations", HaveKeyWithValue(installation.StartedJobAnnotation, current))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Consistently(getInst(ns, "root"), "2s", interval).Should(HaveField("Status.JobID", current), "one job, not one per lost-start check")
}

// Without the reconcile annotation a new root installation does nothing.
func TestRootWithoutAnnotationWaits(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "idle", simpleBlueprint("")))
	// The finalizer shows the controller has seen it; still no job.
	g.Eventually(getInst(ns, "idle"), timeout, interval).Should(HaveField("Finalizers", ContainElement(lsv1alpha1.Finalizer)))
	g.Consistently(getInst(ns, "idle"), "2s", interval).Should(HaveField("Status.JobID", BeEmpty()))
	inst, _ := getInst(ns, "idle")()
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "idle"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
