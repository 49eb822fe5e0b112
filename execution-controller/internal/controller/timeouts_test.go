package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// noDeployerType has no deployer in the tests.
const noDeployerType = "example.com/nobody"

func shortTimeouts(pickup, progressing, abort timeouts.Timeout) func(*controller.Options) {
	return func(o *controller.Options) {
		o.Timeouts = timeouts.Config{Pickup: pickup, Progressing: progressing, Abort: abort}
	}
}

func TestPickupTimeoutWithoutDeployer(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.After(2*time.Second), timeout.Disabled(), timeout.Disabled())))
	g := NewWithT(t)

	orphanType := mockItem("lonely", mockv1alpha1Config())
	orphanType.Type = noDeployerType
	exec := newExecution(ns, "pickup", orphanType, mockItem("after", mockv1alpha1Config(), "lonely"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())

	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "pickup", "lonely").Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	di := getItem(g, ns, "pickup", "lonely")
	g.Expect(di.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(di.Status.JobIDFinished).To(Equal(di.Status.JobID))
	g.Expect(di.Status.JobID).To(Equal(done.Status.JobID))
	le := di.Status.LastError
	g.Expect(le).NotTo(BeNil())
	g.Expect(le.Operation).To(Equal("WaitingForPickup"))
	g.Expect(le.Reason).To(Equal("PickupTimeout"))
	g.Expect(le.Codes).To(Equal([]lsv1alpha1.ErrorCode{"ERR_TIMEOUT"}))
	g.Expect(le.Message).To(Equal("no deployer has reconciled this deployitem within 2 seconds"))
	g.Expect(di.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
	g.Expect(getItem(g, ns, "pickup", "after").Status.JobID).To(BeEmpty())

	// the timeout fired no earlier than 2s after the stamp
	g.Expect(le.LastUpdateTime.Sub(di.CreationTimestamp.Time)).To(BeNumerically(">=", time.Second))
}

// A deploy item no execution manages, stuck in Progressing: the progressing
// timeout (its spec.timeout) sets operation: abort + abort-time; the deployer
// (here: none) does not react, so the abort timeout sets it Failed.
func TestProgressingThenAbortTimeoutOnStandaloneItem(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.Disabled(), timeout.After(time.Hour), timeout.After(2*time.Second))))
	g := NewWithT(t)

	timeout := lsv1alpha1.Duration("2s")
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType, Timeout: &timeout},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	// what a deployer that hangs would have written
	started := metav1.Now()
	di.Status = lsv1alpha1.DeployItemStatus{Phase: lsv1alpha1.PhaseProgressing, JobID: "j1", LastReconcileTime: &started}
	g.Expect(env.Client.Status().Update(ctx, di, client.FieldOwner("stuck-deployer"))).To(Succeed())

	g.Eventually(func(g Gomega) {
		cur := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
		g.Expect(cur.Annotations).To(HaveKeyWithValue(lsv1alpha1.OperationAnnotation, "abort"))
		g.Expect(cur.Annotations).To(HaveKey(lsv1alpha1.AbortTimeAnnotation))
		// Why, in the same write: the deployer's lastError says so.
		g.Expect(cur.Annotations).To(HaveKeyWithValue(timeouts.AbortReasonAnnotation, timeouts.ProgressingTimeoutAbortReason(2*time.Second)))
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	var cur *lsv1alpha1.DeployItem
	g.Eventually(func(g Gomega) {
		cur = &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
		// removed right after the status write
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
		g.Expect(cur.Annotations).NotTo(HaveKey(lsv1alpha1.AbortTimeAnnotation))
		g.Expect(cur.Annotations).NotTo(HaveKey(timeouts.AbortReasonAnnotation))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(cur.Status.JobIDFinished).To(Equal("j1"))
	g.Expect(cur.Status.LastError.Operation).To(Equal(lsv1alpha1.OperationWaitingForAbort))
	g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonAbortingTimeout))
	g.Expect(cur.Status.LastError.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}))
	// the hanging deployer's other fields are untouched
	g.Expect(cur.Status.LastReconcileTime.Unix()).To(Equal(started.Unix()))
	// at least timeout + abort timeout after the start
	g.Expect(cur.Status.LastError.LastUpdateTime.Sub(started.Time)).To(BeNumerically(">=", 3*time.Second))
}

// The abort stamps of an earlier job, left behind (their removal is a second
// write, which can fail), do not fail the item's next job at once: that job
// runs into its own progressing timeout, gets a fresh abort-time, and only
// then fails after the abort timeout.
func TestStaleAbortTimeDoesNotFailTheNextJob(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.Disabled(), timeout.After(time.Hour), timeout.After(2*time.Second))))
	g := NewWithT(t)

	timeout := lsv1alpha1.Duration("2s")
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: ns, Annotations: map[string]string{
			lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationAbort),
			// from a job an hour ago: long past the abort timeout
			lsv1alpha1.AbortTimeAnnotation: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType, Timeout: &timeout},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	// a new job, started now by a deployer that then hangs
	started := metav1.Now()
	di.Status = lsv1alpha1.DeployItemStatus{Phase: lsv1alpha1.PhaseProgressing, JobID: "j2", LastReconcileTime: &started}
	g.Expect(env.Client.Status().Update(ctx, di, client.FieldOwner("stuck-deployer"))).To(Succeed())

	var cur *lsv1alpha1.DeployItem
	g.Eventually(func(g Gomega) {
		cur = &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonAbortingTimeout))
	// not at once: the job's progressing timeout (2s) and then the abort
	// timeout (2s) ran out (times have a resolution of one second)
	g.Expect(cur.Status.LastError.LastUpdateTime.Sub(started.Time)).To(BeNumerically(">=", 3*time.Second))
}

// With every timeout "none", neither an old reconcile-time nor a long
// Progressing phase is touched.
func TestNoneDisablesTimeouts(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.Disabled(), timeout.Disabled(), timeout.Disabled())))
	g := NewWithT(t)

	long := time.Now().Add(-time.Hour)
	unpicked := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "unpicked", Namespace: ns, Annotations: map[string]string{
			lsv1alpha1.ReconcileTimeAnnotation: long.UTC().Format(time.RFC3339),
		}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	slow := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	aborting := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "aborting", Namespace: ns, Annotations: map[string]string{
			lsv1alpha1.OperationAnnotation: "abort", lsv1alpha1.AbortTimeAnnotation: long.UTC().Format(time.RFC3339),
		}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	for _, di := range []*lsv1alpha1.DeployItem{unpicked, slow, aborting} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}
	for _, di := range []*lsv1alpha1.DeployItem{slow, aborting} {
		di.Status = lsv1alpha1.DeployItemStatus{Phase: lsv1alpha1.PhaseProgressing, JobID: "j", LastReconcileTime: &metav1.Time{Time: long}}
		g.Expect(env.Client.Status().Update(ctx, di)).To(Succeed())
	}
	g.Consistently(func(g Gomega) {
		for _, di := range []*lsv1alpha1.DeployItem{unpicked, slow, aborting} {
			cur := &lsv1alpha1.DeployItem{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
			g.Expect(cur.Status.Phase).NotTo(Equal(lsv1alpha1.PhaseFailed), di.Name)
			g.Expect(cur.Annotations).To(Equal(di.Annotations), di.Name)
		}
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// A broken spec.timeout or annotation does not stop the other checks and
// crashes nothing: the default applies and an event tells the user.
func TestInvalidTimeoutSettingsFallBack(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.After(2*time.Second), timeout.Disabled(), timeout.Disabled())))
	g := NewWithT(t)

	// spec.timeout is validated by the schema: a bad value never gets in
	bad := lsv1alpha1.Duration("soon")
	refused := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns},
		Spec:       lsv1alpha1.DeployItemSpec{Type: noDeployerType, Timeout: &bad},
	}
	g.Expect(env.Client.Create(ctx, refused)).NotTo(Succeed())

	// an unparsable abort-time is ignored; the pickup timeout still fires
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: "garbled", Namespace: ns, Annotations: map[string]string{
			lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339),
			lsv1alpha1.AbortTimeAnnotation:     "yesterday",
			lsv1alpha1.OperationAnnotation:     "abort",
		}},
		Spec: lsv1alpha1.DeployItemSpec{Type: noDeployerType},
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
		g.Expect(cur.Status.LastError.Reason).To(Equal(lsv1alpha1.ReasonPickupTimeout))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}
