package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
)

// heldItem is a spec entry no deployer serves: the test ends its jobs by
// hand (finishItem), so spec edits surely land while it runs or waits.
func heldItem(name string, dependsOn ...string) lsv1alpha1.DeployItemTemplate {
	it := mockItem(name, mockv1alpha1.ProviderConfiguration{}, dependsOn...)
	it.Type = noDeployerType
	return it
}

// refNames lists the item names of status.deployItemRefs.
func refNames(exec *lsv1alpha1.Execution) []string {
	out := []string{}
	for _, r := range exec.Status.DeployItemReferences {
		out = append(out, r.Name)
	}
	return out
}

// itemExists reports whether the item's DeployItem exists.
func itemExists(g Gomega, ns, exec, item string) bool {
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: execution.ItemObjectName(exec, item)}, &lsv1alpha1.DeployItem{})
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// editSpec replaces the execution's spec items (retrying conflicts).
func editSpec(g Gomega, exec *lsv1alpha1.Execution, items ...lsv1alpha1.DeployItemTemplate) {
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Spec.DeployItems = items
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// requestReconcile starts the next job of a root execution (operation: reconcile).
func requestReconcile(g Gomega, exec *lsv1alpha1.Execution) {
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		p := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationReconcile)
		g.Expect(env.Client.Patch(ctx, cur, p)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// waitNextJob waits until a job other than prev runs (the item named
// handed has it) and returns its ID.
func waitNextJob(g Gomega, exec *lsv1alpha1.Execution, prev, handed string) string {
	var job string
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		job = cur.Status.JobID
		g.Expect(job).NotTo(BeEmpty())
		g.Expect(job).NotTo(Equal(prev))
		g.Expect(getItem(g, exec.Namespace, exec.Name, handed).Status.JobID).To(Equal(job))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	return job
}

// A root execution's job runs the item set it started with (recorded in
// status.deployItemRefs by the job start): an item added to the spec
// mid-job is not created in that job, which neither waits for it nor
// exports it; the next job creates and runs it.
func TestItemAddedMidJobWaitsForTheNextJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "added", heldItem("a"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	job1 := waitNextJob(g, exec, "", "a")
	g.Expect(refNames(getExec(g, exec))).To(Equal([]string{"a"}))

	// b (served by the mock deployer, so it would finish at once if it ran)
	// is added while a runs.
	editSpec(g, exec, heldItem("a"), mockItem("b", mockv1alpha1.ProviderConfiguration{}))
	g.Consistently(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).To(Equal(job1))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
		g.Expect(refNames(cur)).To(Equal([]string{"a"}), "the job's item set")
		g.Expect(itemExists(g, ns, "added", "b")).To(BeFalse(), "an item added mid-job waits for the next job")
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	finishItem(g, ns, "added", "a", job1)
	done := waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job1))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(refNames(done)).To(Equal([]string{"a"}))
	g.Consistently(func(g Gomega) bool { return itemExists(g, ns, "added", "b") }).
		WithTimeout(500*time.Millisecond).WithPolling(100*time.Millisecond).Should(BeFalse(), "no job, no item")

	// The next job takes the edit.
	requestReconcile(g, exec)
	job2 := waitNextJob(g, exec, job1, "a")
	g.Eventually(func(g Gomega) {
		b := getItem(g, ns, "added", "b")
		g.Expect(b.Status.JobIDFinished).To(Equal(job2))
		g.Expect(b.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	finishItem(g, ns, "added", "a", job2)
	done = waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job2))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(refNames(done)).To(Equal([]string{"a", "b"}))
}

// Items removed from the spec mid-job are still the job's: the job waits for
// a running item it no longer finds in the spec, an item keeps the
// dependencies it started the job with (a dependsOn dropped mid-job waits for
// the next job), and an item of the job whose object and spec entry are both
// gone is not recreated and not waited for. The job ends cleanly; the next
// job deletes what left the spec.
func TestItemRemovedMidJobStillCountsInItsJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "removed", heldItem("a"), heldItem("b", "a"), heldItem("c", "a"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	job1 := waitNextJob(g, exec, "", "a")
	g.Expect(getItem(g, ns, "removed", "b").Status.JobID).To(BeEmpty())
	g.Expect(getItem(g, ns, "removed", "c").Status.JobID).To(BeEmpty())

	// While a runs: a and b leave the spec, c no longer depends on a, and b
	// (never handed a job, so nothing holds it) is deleted by hand.
	editSpec(g, exec, heldItem("c"))
	g.Expect(env.Client.Delete(ctx, getItem(g, ns, "removed", "b"))).To(Succeed())
	g.Eventually(func(g Gomega) bool { return itemExists(g, ns, "removed", "b") }).
		WithTimeout(eventually).WithPolling(poll).Should(BeFalse())
	g.Consistently(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.JobID).To(Equal(job1))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing), "the job still waits for a")
		g.Expect(refNames(cur)).To(Equal([]string{"a", "b", "c"}), "the job's item set")
		g.Expect(getItem(g, ns, "removed", "c").Status.JobID).To(BeEmpty(), "c still waits for a, as when the job started")
		g.Expect(itemExists(g, ns, "removed", "b")).To(BeFalse(), "b is not recreated: its spec entry is gone")
		g.Expect(getItem(g, ns, "removed", "a").DeletionTimestamp).To(BeNil(), "a is deleted by the next job, not this one")
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	finishItem(g, ns, "removed", "a", job1)
	finishItem(g, ns, "removed", "c", job1)
	done := waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job1))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(itemExists(g, ns, "removed", "a")).To(BeTrue())
	g.Expect(itemExists(g, ns, "removed", "b")).To(BeFalse())

	// The next job runs the spec as it is: a is an orphan and deleted, c runs alone.
	requestReconcile(g, exec)
	job2 := waitNextJob(g, exec, job1, "c")
	g.Eventually(func(g Gomega) bool { return itemExists(g, ns, "removed", "a") }).
		WithTimeout(eventually).WithPolling(poll).Should(BeFalse())
	finishItem(g, ns, "removed", "c", job2)
	done = waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job2))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(refNames(done)).To(Equal([]string{"c"}))
}

// An item of a job that depends on an item the job dropped (its spec entry
// removed and its object deleted before it ran) can never start in that
// job: the job ends Failed with DependenciesRemoved instead of waiting for
// ever, and the next job runs the edited spec.
func TestItemWaitingForADroppedItemFailsTheJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "dropped", heldItem("a"), heldItem("x", "a"), heldItem("y", "x"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	job1 := waitNextJob(g, exec, "", "a")

	// x leaves the spec (and y's dependsOn) and its object is deleted while a runs.
	editSpec(g, exec, heldItem("a"), heldItem("y"))
	g.Expect(env.Client.Delete(ctx, getItem(g, ns, "dropped", "x"))).To(Succeed())
	g.Eventually(func(g Gomega) bool { return itemExists(g, ns, "dropped", "x") }).
		WithTimeout(eventually).WithPolling(poll).Should(BeFalse())
	finishItem(g, ns, "dropped", "a", job1)
	done := waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job1))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError).NotTo(BeNil())
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonDependenciesRemoved))
	g.Expect(done.Status.LastError.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(done.Status.LastError.Message).To(ContainSubstring("deploy items y cannot run in job " + job1 + ": they depend on x"))
	g.Expect(getItem(g, ns, "dropped", "y").Status.JobID).To(BeEmpty(), "y never started")
	g.Expect(itemExists(g, ns, "dropped", "x")).To(BeFalse(), "x was not recreated")

	requestReconcile(g, exec)
	job2 := waitNextJob(g, exec, job1, "y")
	finishItem(g, ns, "dropped", "a", job2)
	finishItem(g, ns, "dropped", "y", job2)
	done = waitFinished(t, exec)
	g.Expect(done.Status.JobID).To(Equal(job2))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
}
