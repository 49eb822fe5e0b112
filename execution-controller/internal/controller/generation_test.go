package controller_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
)

// handJob hands job to exec as its installation would: status.jobID,
// written under the installation controller's field manager.
func handJob(g Gomega, exec *lsv1alpha1.Execution, job string) {
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Status.JobID = job
		g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// finishItem ends job on an item no deployer serves, as a deployer would:
// Succeeded with jobIDFinished = job.
func finishItem(g Gomega, ns, exec, item, job string) {
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, exec, item)
		g.Expect(di.Status.JobID).To(Equal(job))
		di.Status.Phase, di.Status.JobIDFinished = lsv1alpha1.PhaseSucceeded, job
		g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// conditionGenerations maps each condition type to its observedGeneration.
func conditionGenerations(exec *lsv1alpha1.Execution) map[string]int64 {
	out := map[string]int64{}
	for _, c := range exec.Status.Conditions {
		out[c.Type] = c.ObservedGeneration
	}
	return out
}

// The status says which generation of the spec it describes (Kubernetes API
// conventions). A job takes the spec as it is when the job starts; a spec
// edited mid-job waits for the next job, and so do status.observedGeneration
// and the observedGeneration of every condition: they stay at the job's
// generation while it runs and when it ends, and the next job moves them.
func TestConditionsCarryTheJobsGeneration(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	// No deployer serves the item: the test ends its jobs by hand, so the
	// spec edit surely lands while the item runs.
	it := mockItem("a", mockv1alpha1.ProviderConfiguration{})
	it.Type = noDeployerType
	exec := ownedExecution(g, ns, "gen", it)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())

	handJob(g, exec, "job-1")
	var running *lsv1alpha1.Execution
	g.Eventually(func(g Gomega) {
		running = getExec(g, exec)
		g.Expect(running.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
		g.Expect(getItem(g, ns, "gen", "a").Status.JobID).To(Equal("job-1"))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	gen1 := running.Generation
	g.Expect(running.Status.ObservedGeneration).To(Equal(gen1))
	g.Expect(conditionGenerations(running)).To(Equal(map[string]int64{execution.ConditionProgressing: gen1}))

	// The spec is edited while the item runs.
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Spec.DeployItems[0].Labels = map[string]string{"edited": "yes"}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	gen2 := getExec(g, exec).Generation
	g.Expect(gen2).To(BeNumerically(">", gen1))
	atJobsGeneration := func(gen int64) func(g Gomega) {
		return func(g Gomega) {
			cur := getExec(g, exec)
			g.Expect(cur.Generation).To(Equal(gen2))
			g.Expect(cur.Status.ObservedGeneration).To(Equal(gen))
			g.Expect(conditionGenerations(cur)).To(HaveEach(gen))
		}
	}
	g.Consistently(func(g Gomega) {
		atJobsGeneration(gen1)(g)
		g.Expect(getItem(g, ns, "gen", "a").Labels).NotTo(HaveKey("edited"), "the edit waits for the next job")
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	// The job ends: its outcome describes the generation it ran with, and
	// keeps doing so until a job takes the edit.
	finishItem(g, ns, "gen", "a", "job-1")
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(done.Status.ObservedGeneration).To(Equal(gen1))
	g.Expect(conditionGenerations(done)).To(Equal(map[string]int64{
		execution.ConditionProgressing: gen1, lsv1alpha1.ConditionReady: gen1,
	}))
	g.Consistently(atJobsGeneration(gen1)).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	// The next job takes the edited spec, and the generation moves with it:
	// at its start for Progressing, at its end for Ready.
	handJob(g, exec, "job-2")
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
		g.Expect(cur.Status.ObservedGeneration).To(Equal(gen2))
		g.Expect(conditionGenerations(cur)).To(Equal(map[string]int64{
			execution.ConditionProgressing: gen2, lsv1alpha1.ConditionReady: gen1,
		}))
		di := getItem(g, ns, "gen", "a")
		g.Expect(di.Labels).To(HaveKeyWithValue("edited", "yes"))
		g.Expect(di.Status.JobID).To(Equal("job-2"))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	finishItem(g, ns, "gen", "a", "job-2")
	done = waitFinished(t, exec)
	g.Expect(done.Status.JobIDFinished).To(Equal("job-2"))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
	g.Expect(done.Status.ObservedGeneration).To(Equal(gen2))
	g.Expect(conditionGenerations(done)).To(Equal(map[string]int64{
		execution.ConditionProgressing: gen2, lsv1alpha1.ConditionReady: gen2,
	}))
}

// A spec edited mid-job so that its dependencies cannot be satisfied fails
// the running job: the failure is about the edited spec, which the
// controller acted on, so the status and its conditions carry the edited
// generation.
func TestSpecBrokenMidJobFailsWithItsGeneration(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	it := mockItem("a", mockv1alpha1.ProviderConfiguration{})
	it.Type = noDeployerType
	exec := ownedExecution(g, ns, "broken", it)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	handJob(g, exec, "job-1")
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "broken", "a").Status.JobID).To(Equal("job-1"))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	gen1 := getExec(g, exec).Generation

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Spec.DeployItems = append(cur.Spec.DeployItems, mockItem("b", mockv1alpha1.ProviderConfiguration{}, "ghost"))
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Generation).To(BeNumerically(">", gen1))
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(done.Status.LastError.Reason).To(Equal(execution.ReasonUnknownDependencies))
	g.Expect(done.Status.ObservedGeneration).To(Equal(done.Generation))
	g.Expect(conditionGenerations(done)).To(Equal(map[string]int64{
		execution.ConditionProgressing: done.Generation, lsv1alpha1.ConditionReady: done.Generation,
	}))
}

// requestLog records the method and path of every request a manager sends,
// in the order they are sent.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (l *requestLog) wrap(cfg *rest.Config) {
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
			l.mu.Unlock()
			return next.RoundTrip(r)
		})
	})
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

func isInstallationGet(req string) bool {
	return strings.HasPrefix(req, http.MethodGet+" ") && strings.Contains(req, "/installations/")
}

// A deleted execution its installation owns reads the installation live
// (this controller caches none) only while it waits for a deletion job - to
// know whether one will ever be handed over. Once the installation has
// handed the job over, no reconcile of that job reads it again.
func TestHandedDeletionJobReadsNoInstallation(t *testing.T) {
	ns := newNamespace(t)
	reqs := &requestLog{}
	startManagerWith(t, ns, testOptions(), reqs.wrap)
	g := NewWithT(t)

	// A chain: its deletion takes several reconciles per item.
	exec := ownedExecution(g, ns, "del-reads",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
		mockItem("c", mockv1alpha1.ProviderConfiguration{}, "b"),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	handJob(g, exec, "install-1")
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(slices.ContainsFunc(reqs.all(), isInstallationGet)).To(BeFalse(), "an install job reads no installation")

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getExec(g, exec).Status.Conditions, execution.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(execution.ReasonWaitingForJob))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(slices.ContainsFunc(reqs.all(), isInstallationGet)).To(BeTrue(), "the wait reads the installation")

	handJob(g, exec, "delete-1")
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// The first item deletion is the deletion job's: every reconcile after
	// it works from a cache that shows the handed job (a reconcile of the
	// wait may still read the installation before it, that is its due).
	log := reqs.all()
	first := slices.IndexFunc(log, func(req string) bool {
		return strings.HasPrefix(req, http.MethodDelete+" ") && strings.Contains(req, "/deployitems/")
	})
	g.Expect(first).To(BeNumerically(">=", 0), "no deploy item deleted")
	var after []string
	for _, req := range log[first:] {
		if isInstallationGet(req) {
			after = append(after, req)
		}
	}
	g.Expect(after).To(BeEmpty(), "the handed deletion job read the installation; the requests from the first item deletion on:\n%s",
		strings.Join(log[first:], "\n"))
	g.Expect(slices.ContainsFunc(log[first:], func(req string) bool {
		return strings.HasPrefix(req, http.MethodDelete+" ") && strings.Contains(req, execution.ItemObjectName("del-reads", "a"))
	})).To(BeTrue(), "the job went on reconciling after its first deletion")
}

// A deletion job the execution runs itself, because its installation is
// gone, stays its own across a controller restart: the restarted controller
// reads the installation once, and the job's status.jobID (the execution
// controller's field then) is kept in every status write until the end.
func TestOwnDeletionJobSurvivesRestart(t *testing.T) {
	ns := newNamespace(t)
	first := startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := ownedExecution(g, ns, "own-del",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	handJob(g, exec, "install-1")
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	// Finalizers of the test's hold both items' deletions.
	const hold = "test.terrace.dev/hold"
	setHold := func(item string, on bool) {
		g.Eventually(func(g Gomega) {
			di := getItem(g, ns, "own-del", item)
			if on {
				di.Finalizers = append(di.Finalizers, hold)
			} else {
				di.Finalizers = slices.DeleteFunc(di.Finalizers, func(f string) bool { return f == hold })
			}
			g.Expect(env.Client.Update(ctx, di)).To(Succeed())
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	}
	setHold("a", true)
	setHold("b", true)

	// The installation goes without its deletion job, then the execution.
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-del"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	var job string
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseTriggerDelete))
		g.Expect(cur.Status.JobIDFinished).To(Equal("install-1"))
		job = cur.Status.JobID
		g.Expect(job).NotTo(Equal("install-1"))
		g.Expect(getItem(g, ns, "own-del", "b").DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	first.stop()
	startManager(t, ns, testOptions())
	setHold("b", false)
	// b gone, a's deletion starts: the status write of Deleting still
	// carries the job (an apply leaving it out would remove it).
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseDeleting))
		g.Expect(cur.Status.JobID).To(Equal(job))
		g.Expect(getItem(g, ns, "own-del", "a").DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	setHold("a", false)
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}
