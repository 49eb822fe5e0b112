package controller_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// writeLog records the manager's writes (method, path, content type), so a
// test can tell an apply from a merge patch.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) wrap(cfg *rest.Config) {
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet {
				l.mu.Lock()
				l.writes = append(l.writes, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
				l.mu.Unlock()
			}
			return next.RoundTrip(r)
		})
	})
}

func (l *writeLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes[i:])
}

func (l *writeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

// reconcileAgain starts a new job on a root execution and waits for it to end.
func reconcileAgain(t *testing.T, exec *lsv1alpha1.Execution, edit func(*lsv1alpha1.Execution)) *lsv1alpha1.Execution {
	t.Helper()
	g := NewWithT(t)
	before := getExec(g, exec).Status.JobID
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		if edit != nil {
			edit(cur)
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationReconcile)
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	var done *lsv1alpha1.Execution
	g.Eventually(func(g Gomega) {
		done = getExec(g, exec)
		g.Expect(done.Status.JobID).NotTo(Equal(before))
		g.Expect(done.Status.JobIDFinished).To(Equal(done.Status.JobID))
		g.Expect(done.Status.Phase.IsFinal()).To(BeTrue())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	return done
}

// A label the template drops goes from the item with the next job, even when
// nothing else changed; a label a user put on the item stays, and an item
// whose only extra labels are a user's is not written.
func TestDroppedTemplateLabelIsRemovedButOthersStay(t *testing.T) {
	ns := newNamespace(t)
	writes := &writeLog{}
	startManagerWith(t, ns, testOptions(), writes.wrap)
	g := NewWithT(t)

	a := mockItem("a", mockv1alpha1.ProviderConfiguration{})
	a.Labels = map[string]string{"keep": "1", "drop": "1"}
	exec := newExecution(ns, "labels", a)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	item := getItem(g, ns, "labels", "a")
	g.Expect(item.Labels).To(HaveKeyWithValue("drop", "1"))
	g.Expect(env.Client.Patch(ctx, item, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"user":"x"}}}`)), client.FieldOwner("someone"))).To(Succeed())

	done := reconcileAgain(t, exec, func(e *lsv1alpha1.Execution) { e.Spec.DeployItems[0].Labels = map[string]string{"keep": "1"} })
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	item = getItem(g, ns, "labels", "a")
	g.Expect(item.Labels).NotTo(HaveKey("drop"), "the label the template dropped is gone")
	g.Expect(item.Labels).To(HaveKeyWithValue("keep", "1"))
	g.Expect(item.Labels).To(HaveKeyWithValue("user", "x"), "a user's label stays")
	g.Expect(item.Labels).To(HaveKeyWithValue(lsv1alpha1.ExecutionItemNameLabel, "a"))

	// Nothing changed: the next job writes the item's metadata only for the
	// hand-over (a merge patch of reconcile-time), never an apply.
	from := writes.len()
	g.Expect(reconcileAgain(t, exec, nil).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	path := "/namespaces/" + ns + "/deployitems/" + execution.ItemObjectName("labels", "a")
	for _, w := range writes.since(from) {
		if strings.Contains(w, path+" ") {
			g.Expect(w).To(ContainSubstring("merge-patch"), "unexpected write of the unchanged item: %s", w)
		}
	}
	g.Expect(getItem(g, ns, "labels", "a").Labels).To(HaveKeyWithValue("user", "x"))
}

// A label someone else put on an item is not this controller's, and stays.
// Telling so takes a live read of the item (the cache holds no
// managedFields): once, not in every job. A label the template took over
// is this controller's from then on, and goes when the template drops it.
func TestForeignLabelIsReadOnce(t *testing.T) {
	ns := newNamespace(t)
	reqs := &requestLog{}
	startManagerWith(t, ns, testOptions(), reqs.wrap)
	g := NewWithT(t)

	exec := newExecution(ns, "foreign", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Patch(ctx, getItem(g, ns, "foreign", "a"), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"user":"x"}}}`)), client.FieldOwner("someone"))).To(Succeed())

	itemGet := http.MethodGet + " /apis/" + lsv1alpha1.SchemeGroupVersion.String() + "/namespaces/" + ns +
		"/deployitems/" + execution.ItemObjectName("foreign", "a")
	from := len(reqs.all())
	for range 3 {
		g.Expect(reconcileAgain(t, exec, nil).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}
	var reads []string
	for _, req := range reqs.all()[from:] {
		if req == itemGet {
			reads = append(reads, req)
		}
	}
	g.Expect(reads).To(HaveLen(1), "three jobs read the item with the foreign label live")
	g.Expect(getItem(g, ns, "foreign", "a").Labels).To(HaveKeyWithValue("user", "x"))

	// The template sets the label: the apply takes it over. Once the
	// template drops it, it goes.
	done := reconcileAgain(t, exec, func(e *lsv1alpha1.Execution) { e.Spec.DeployItems[0].Labels = map[string]string{"user": "y"} })
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(getItem(g, ns, "foreign", "a").Labels).To(HaveKeyWithValue("user", "y"))
	done = reconcileAgain(t, exec, func(e *lsv1alpha1.Execution) { e.Spec.DeployItems[0].Labels = nil })
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(getItem(g, ns, "foreign", "a").Labels).NotTo(HaveKey("user"), "the label the template took over and dropped")
}

// An abort request left on an item from an earlier job (operation: abort with
// an abort-time older than the item's last job start) is removed with the
// hand-over of the next job: it is about a job that ended and must not
// abort the new one.
func TestHandOverDropsALeftoverAbortRequest(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.Disabled(), timeout.Disabled(), timeout.Disabled())))
	g := NewWithT(t)

	a := mockItem("a", mockv1alpha1.ProviderConfiguration{})
	a.Type = noDeployerType // the test plays its deployer
	exec := newExecution(ns, "stale-abort", a)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	var job string
	g.Eventually(func(g Gomega) {
		job = getExec(g, exec).Status.JobID
		g.Expect(job).NotTo(BeEmpty())
		g.Expect(getItem(g, ns, "stale-abort", "a").Status.JobID).To(Equal(job))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	g.Expect(env.Client.Patch(ctx, getItem(g, ns, "stale-abort", "a"), client.RawPatch("application/merge-patch+json", []byte(
		`{"metadata":{"annotations":{"landscaper.gardener.cloud/reconcile-time":null,"landscaper.gardener.cloud/operation":"abort","landscaper.gardener.cloud/abort-time":"`+old+`"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "stale-abort", "a")
		now := metav1.Now()
		di.Status.Phase, di.Status.JobIDFinished, di.Status.LastReconcileTime = lsv1alpha1.PhaseSucceeded, job, &now
		g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		di := getItem(g, ns, "stale-abort", "a")
		g.Expect(di.Status.JobID).NotTo(Equal(job), "second job handed over")
		g.Expect(di.Annotations).To(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
		g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.AbortTimeAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// An item failed for its pickup timeout loses a left-over abort request with
// its reconcile-time (the same write): its job is over, nothing is left to
// abort.
func TestPickupTimeoutDropsALeftoverAbortRequest(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.After(2*time.Second), timeout.Disabled(), timeout.After(time.Hour))))
	g := NewWithT(t)

	started := metav1.NewTime(time.Now().Add(-time.Minute))
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "leftover", Namespace: ns, Annotations: map[string]string{
			lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339),
			lsv1alpha1.OperationAnnotation:     string(lsv1alpha1.OperationAbort),
			lsv1alpha1.AbortTimeAnnotation:     started.Add(-time.Hour).UTC().Format(time.RFC3339),
		}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	di.Status = lsv1alpha1.DeployItemStatus{Phase: lsv1alpha1.PhaseSucceeded, JobID: "j2", JobIDFinished: "j1", LastReconcileTime: &started}
	g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())

	g.Eventually(func(g Gomega) {
		cur := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
		g.Expect(cur.Status.LastError).NotTo(BeNil())
		g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonPickupTimeout))
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.AbortTimeAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// "<exec>-exports" created by hand (no controller, not labelled as an
// execution's exports) is not taken over: DataObjectNameConflict. The one
// an earlier execution of the name wrote, whose owner reference was removed
// (as an orphaning deletion of that execution does), is the execution's own
// and is adopted.
func TestUnownedExportsDataObject(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())

	t.Run("by hand", func(t *testing.T) {
		g := NewWithT(t)
		byHand := &lsv1alpha1.DataObject{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hand-exports"},
			Data:       lsv1alpha1.AnyJSON{RawMessage: json.RawMessage(`"mine"`)},
		}
		g.Expect(env.Client.Create(ctx, byHand)).To(Succeed())
		exec := newExecution(ns, "hand", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"ours"`)}))
		g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
		expectConfigFailure(t, exec, execution.ReasonDataObjectNameConflict, ns+"/hand-exports", "nothing")
		cur := &lsv1alpha1.DataObject{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(byHand), cur)).To(Succeed())
		g.Expect(string(cur.Data.RawMessage)).To(Equal(`"mine"`))
		g.Expect(cur.OwnerReferences).To(BeEmpty())
		g.Expect(getExec(g, exec).Status.ExportReference).To(BeNil())
	})
	t.Run("orphaned own", func(t *testing.T) {
		g := NewWithT(t)
		earlier := newExecution(ns, "own", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"earlier"`)}))
		g.Expect(env.Client.Create(ctx, earlier)).To(Succeed())
		g.Expect(waitFinished(t, earlier).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
		g.Expect(env.Client.Delete(ctx, earlier)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), &lsv1alpha1.Execution{}))
		}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
		// What the garbage collector does on an orphaning deletion.
		orphaned := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-exports"}}
		g.Expect(env.Client.Patch(ctx, orphaned, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"ownerReferences":null}}`)))).To(Succeed())

		exec := newExecution(ns, "own", mockItem("a", mockv1alpha1.ProviderConfiguration{Export: export(`"ours"`)}))
		g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
		done := waitFinished(t, exec)
		g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "lastError: %+v", done.Status.LastError)
		cur := &lsv1alpha1.DataObject{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orphaned), cur)).To(Succeed())
		g.Expect(string(cur.Data.RawMessage)).To(MatchJSON(`{"a":"ours"}`))
		g.Expect(metav1.GetControllerOf(cur)).NotTo(BeNil())
		g.Expect(metav1.GetControllerOf(cur).UID).To(Equal(done.UID))
	})
}

// An item of the running job deleted by hand whose name a foreign DeployItem
// takes meanwhile fails the job - but only once the job's other items that
// still run have finished, as for a failed item: the job is marked failing
// (lastError) and stays Progressing until then.
func TestNameConflictMidJobWaitsForRunningItems(t *testing.T) {
	ns := newNamespace(t)
	opts := testOptions(shortTimeouts(timeout.Disabled(), timeout.Disabled(), timeout.Disabled()))
	first := startManager(t, ns, opts)
	g := NewWithT(t)

	slow := mockItem("slow", mockv1alpha1.ProviderConfiguration{})
	slow.Type = noDeployerType // runs until the test finishes it
	exec := newExecution(ns, "midjob", slow, mockItem("victim", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	var job string
	g.Eventually(func(g Gomega) {
		job = getExec(g, exec).Status.JobID
		g.Expect(job).NotTo(BeEmpty())
		g.Expect(getItem(g, ns, "midjob", "slow").Status.JobID).To(Equal(job))
		v := getItem(g, ns, "midjob", "victim")
		g.Expect(v.Status.JobIDFinished).To(Equal(job))
		g.Expect(v.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// With the controller stopped (so it cannot recreate the item first),
	// the item goes and a foreign DeployItem takes its name.
	first.stop()
	victim := getItem(g, ns, "midjob", "victim")
	g.Expect(env.Client.Patch(ctx, victim, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, victim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &lsv1alpha1.DeployItem{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())
	foreign := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	startManager(t, ns, opts)

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.LastError).NotTo(BeNil())
		g.Expect(cur.Status.LastError.Reason).To(Equal(execution.ReasonDeployItemNameConflict))
		g.Expect(cur.Status.JobIDFinished).NotTo(Equal(job), "the job ended while slow still runs")
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	finishItem(g, ns, "midjob", "slow", job)
	expectConfigFailure(t, exec, execution.ReasonDeployItemNameConflict, victim.Name, "nothing")
	cur := &lsv1alpha1.DeployItem{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), cur)).To(Succeed())
	g.Expect(cur.UID).To(Equal(foreign.UID))
	g.Expect(cur.OwnerReferences).To(BeEmpty())
}

// operation: interrupt during a deletion job: a deletion already running
// cannot be taken back, so the job deletes no further item, waits for the
// running deletion, and then ends DeleteFailed (Interrupted) naming the item
// left; the execution keeps its finalizer until a retry deletes the rest.
func TestInterruptedDeletionStopsAndSaysWhatIsLeft(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "intdel",
		mockItem("a", mockv1alpha1.ProviderConfiguration{}),
		mockItem("b", mockv1alpha1.ProviderConfiguration{}, "a"),
	)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	// b's deletion (first: a waits for it) stays running while the hold is on.
	const hold = "test.terrace.dev/hold"
	g.Expect(env.Client.Patch(ctx, getItem(g, ns, "intdel", "b"), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":["`+hold+`","`+lsv1alpha1.Finalizer+`"]}}`)))).To(Succeed())

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "intdel", "b").DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"interrupt"}}}`)))).To(Succeed())

	// The annotation goes after the status write that acted on it.
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	cur := getExec(g, exec)
	g.Expect(cur.Status.LastError).NotTo(BeNil())
	g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
	g.Expect(cur.Status.JobIDFinished).NotTo(Equal(cur.Status.JobID), "the job ended while b is still being deleted")
	g.Expect(getItem(g, ns, "intdel", "a").DeletionTimestamp).To(BeNil())

	g.Eventually(func(g Gomega) {
		b := getItem(g, ns, "intdel", "b")
		b.Finalizers = slices.DeleteFunc(b.Finalizers, func(f string) bool { return f == hold })
		g.Expect(env.Client.Update(ctx, b)).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseDeleteFailed))
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
		g.Expect(cur.Status.LastError.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}))
		g.Expect(cur.Status.LastError.Message).To(ContainSubstring("left: a"))
		g.Expect(cur.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(getItem(g, ns, "intdel", "a").DeletionTimestamp).To(BeNil(), "no further item deleted")

	// A retry deletes the rest.
	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"reconcile"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
		g.Expect(listItems(g, ns)).To(BeEmpty())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// operation: interrupt on a deletion job the installation handed over that
// has not started yet (the interrupt came with it): it is interrupted as any
// deletion job - nothing deleted, DeleteFailed (Interrupted) naming the items
// left, the finalizer kept - not ended Failed as an install job would be.
func TestInterruptOfAHandedDeletionJobBeforeItStarts(t *testing.T) {
	ns := newNamespace(t)
	first := startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := ownedExecution(g, ns, "handint", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
		cur.Status.JobID = "install-1"
		g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getExec(g, exec).Status.Conditions, execution.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(execution.ReasonWaitingForJob))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// The deletion job and the interrupt both arrive before the controller
	// sees either (it is stopped meanwhile, so the order is certain).
	first.stop()
	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		cur.Status.JobID = "delete-1"
		g.Expect(env.Client.Status().Update(ctx, cur, client.FieldOwner("installation-controller"))).To(Succeed())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"interrupt"}}}`)))).To(Succeed())
	startManager(t, ns, testOptions())

	g.Eventually(func(g Gomega) {
		cur := getExec(g, exec)
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
		g.Expect(cur.Status.JobIDFinished).To(Equal("delete-1"))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseDeleteFailed))
		g.Expect(cur.Status.LastError).NotTo(BeNil())
		g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonInterrupted))
		g.Expect(cur.Status.LastError.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}))
		g.Expect(cur.Status.LastError.Message).To(ContainSubstring("left: a"))
		g.Expect(cur.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(getItem(g, ns, "handint", "a").DeletionTimestamp).To(BeNil(), "nothing deleted")
}

// operation: interrupt while no job runs is removed and changes nothing: no
// Warning event, the last job's status stays.
func TestInterruptWithoutJobIsIgnored(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	exec := newExecution(ns, "idle", mockItem("a", mockv1alpha1.ProviderConfiguration{}))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Patch(ctx, getExec(g, exec), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"landscaper.gardener.cloud/operation":"interrupt"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getExec(g, exec).Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return observabilitytest.Events(g, env.Client, ns, "idle") }).
		WithTimeout(eventually).WithPolling(poll).Should(ContainElement(corev1.EventTypeNormal + "/" + execution.ReasonInterruptIgnored))
	g.Expect(observabilitytest.Events(g, env.Client, ns, "idle")).NotTo(ContainElement(corev1.EventTypeWarning + "/" + lsv1alpha1.ReasonInterrupted))
	cur := getExec(g, exec)
	g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(cur.Status.LastError).To(BeNil())
	g.Expect(cur.Status.JobIDFinished).To(Equal(done.Status.JobID))
	g.Expect(getItem(g, ns, "idle", "a").Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
}
