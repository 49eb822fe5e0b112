package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// TestProgressingTimeoutIsTheCauseOnItemAndExecution: an item the
// progressing timeout aborts ends as Landscaper reports a progressing
// timeout (the deployer reads the reason this controller writes beside
// operation: abort), and the execution's lastError names that item with its
// own reason and message, and its code, instead of only "deploy items
// failed: stuck".
func TestProgressingTimeoutIsTheCauseOnItemAndExecution(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions(shortTimeouts(timeout.Disabled(), timeout.After(time.Hour), timeout.After(time.Minute))))
	g := NewWithT(t)

	stuck := mockItem("stuck", mockv1alpha1.ProviderConfiguration{Phase: "Progressing"})
	d := lsv1alpha1.Duration("2s")
	stuck.Timeout = &d
	exec := newExecution(ns, "slow", stuck)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	done := waitFinished(t, exec)
	g.Expect(done.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))

	di := getItem(g, ns, "slow", "stuck")
	le := di.Status.LastError
	g.Expect(le).NotTo(BeNil())
	g.Expect(le.Reason).To(Equal(lsv1alpha1.ReasonProgressingTimeout))
	g.Expect(le.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}))
	g.Expect(le.Message).To(ContainSubstring("progressing timeout (2s)"))
	g.Eventually(func(g Gomega) {
		g.Expect(getItem(g, ns, "slow", "stuck").Annotations).NotTo(Or(HaveKey(lsv1alpha1.OperationAnnotation),
			HaveKey(lsv1alpha1.AbortTimeAnnotation), HaveKey(timeouts.AbortReasonAnnotation)))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	ele := done.Status.LastError
	g.Expect(ele.Reason).To(Equal(execution.ReasonDeployItemsFailed))
	g.Expect(ele.Message).To(HavePrefix("deploy items failed: stuck; stuck: ProgressingTimeout: "))
	g.Expect(ele.Message).To(ContainSubstring("progressing timeout (2s)"))
	g.Expect(ele.Codes).To(ContainElement(lsv1alpha1.ErrorTimeout))
}

// unknownOperationEvents returns the UnknownOperation Events on the object.
func unknownOperationEvents(g Gomega, ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == execution.ReasonUnknownOperation {
			out = append(out, e)
		}
	}
	return out
}

// TestUnknownOperationOnExecutionIsReportedOnce: a typo in an execution's
// operation annotation is one Warning Event naming the value and the
// accepted ones, not one per reconcile; the annotation (the user's) stays;
// another value is reported again.
func TestUnknownOperationOnExecutionIsReportedOnce(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	exec := newExecution(ns, "typo", mockItem("a", mockv1alpha1Config()))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	annotate := func(kv map[string]string, labels map[string]string) {
		cur := getExec(g, exec)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		for k, v := range kv {
			cur.Annotations[k] = v
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range labels {
			cur.Labels[k] = v
		}
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}
	annotate(map[string]string{lsv1alpha1.OperationAnnotation: "reconcil"}, nil)
	g.Eventually(func(g Gomega) {
		evs := unknownOperationEvents(g, ns, "typo")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(And(ContainSubstring(`"reconcil"`), ContainSubstring("reconcile, interrupt")))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	// Each edit is a reconcile (the execution is watched without filter).
	for _, v := range []string{"1", "2", "3"} {
		annotate(nil, map[string]string{"touch": v})
	}
	g.Consistently(func(g Gomega) {
		evs := unknownOperationEvents(g, ns, "typo")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Series).To(BeNil(), "emitted once")
	}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	cur := getExec(g, exec)
	g.Expect(cur.Annotations).To(HaveKeyWithValue(lsv1alpha1.OperationAnnotation, "reconcil"), "the user's annotation stays")
	g.Expect(cur.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))

	annotate(map[string]string{lsv1alpha1.OperationAnnotation: "interrupted"}, nil)
	g.Eventually(func(g Gomega) {
		g.Expect(unknownOperationEvents(g, ns, "typo")).To(HaveLen(2))
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}
