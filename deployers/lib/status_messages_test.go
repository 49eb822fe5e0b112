package lib_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/status"
)

// abortWith writes an abort request the way the execution controller's
// progressing timeout does: operation, abort-time and (when why is not
// empty) the abort's reason, in one write.
func abortWith(g *WithT, di *lsv1alpha1.DeployItem, at time.Time, why string) {
	kv := []string{lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationAbort)}
	if !at.IsZero() {
		kv = append(kv, lsv1alpha1.AbortTimeAnnotation, at.UTC().Format(time.RFC3339))
	}
	if why != "" {
		kv = append(kv, lib.AbortReasonAnnotation, why)
	}
	annotate(g, di, kv...)
}

// TestAbortAfterProgressingTimeoutSaysSo: an abort the execution controller's
// progressing timeout requested ends as Landscaper reports a progressing
// timeout (reason ProgressingTimeout, ERR_TIMEOUT, the timeout in the
// message), not as a user's "aborted on request"; a user's abort still is
// one, also when a reason of an earlier job's abort was left behind.
func TestAbortAfterProgressingTimeoutSaysSo(t *testing.T) {
	ns, g := setup(t, &behaviour{pending: true})
	ctx := context.Background()
	di := newItem(ns, "slow")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))

	const why = "ProgressingTimeout: the deploy item was progressing for longer than its progressing timeout (20s)"
	abortWith(g, di, time.Now(), why)
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le := get(g, di)().Status.LastError
	g.Expect(le.Operation).To(Equal(lib.OperationAbort))
	g.Expect(le.Reason).To(Equal(lib.ReasonProgressingTimeout))
	g.Expect(le.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}))
	g.Expect(le.Message).To(And(ContainSubstring("progressing timeout"), ContainSubstring("(20s)")))
	g.Eventually(func() map[string]string { return get(g, di)().Annotations }, timeout, interval).ShouldNot(Or(
		HaveKey(lsv1alpha1.OperationAnnotation), HaveKey(lsv1alpha1.AbortTimeAnnotation), HaveKey(lib.AbortReasonAnnotation)))

	// A user's abort: no reason.
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing),
		WithTransform(func(d *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return d.Status.LastError }, BeNil())))
	abortWith(g, di, time.Time{}, "")
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le = get(g, di)().Status.LastError
	g.Expect(le.Reason).To(Equal(lib.ReasonAborted))
	g.Expect(le.Codes).To(Equal([]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}))
	g.Expect(le.Message).To(Equal("aborted on request (operation: abort)"))

	// A user's abort beside a reason and abort-time left over from an earlier
	// job (older than this job's start) is still the user's.
	g.Eventually(func() map[string]string { return get(g, di)().Annotations }, timeout, interval).ShouldNot(HaveKey(lsv1alpha1.OperationAnnotation))
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing),
		WithTransform(func(d *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return d.Status.LastError }, BeNil())))
	abortWith(g, di, time.Now().Add(-time.Hour), why)
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	g.Expect(get(g, di)().Status.LastError.Reason).To(Equal(lib.ReasonAborted))
}

// TestEveryFailedDeletionNamesTheWaysOn: a deletion that fails for good with
// the deployer's own error (say an invalid kubeconfig) says how to go on, as
// one failing for a missing Target does: fix it and retry with operation:
// reconcile, or delete-without-uninstall.
func TestEveryFailedDeletionNamesTheWaysOn(t *testing.T) {
	ns, g := setup(t, &behaviour{deleteFail: lib.ConfigError(lib.ReasonInvalidConfig, "Target t: the kubeconfig is invalid")})
	ctx := context.Background()
	di := newItem(ns, "undeletable")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseFailed))
	le := get(g, di)().Status.LastError
	g.Expect(le.Operation).To(Equal(lib.OperationDelete))
	g.Expect(le.Reason).To(Equal(lib.ReasonInvalidConfig))
	g.Expect(le.Message).To(And(HavePrefix("Target t: the kubeconfig is invalid"),
		ContainSubstring(lsv1alpha1.OperationAnnotation+": "+string(lsv1alpha1.OperationReconcile)),
		ContainSubstring(lsv1alpha1.DeleteWithoutUninstallAnnotation)))
	annotate(g, di, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}

// unknownOperationEvents returns the UnknownOperation Events on the object.
func unknownOperationEvents(g Gomega, c client.Reader, ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == lib.ReasonUnknownOperation {
			out = append(out, e)
		}
	}
	return out
}

// TestUnknownOperationIsReportedOnce: a typo in the operation annotation is
// one Warning Event naming the value and the accepted ones - not one per
// reconcile (an Event emitted again would carry a series) - and the
// annotation, the user's, stays. Another value is reported again.
func TestUnknownOperationIsReportedOnce(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	di := newItem(ns, "typo")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))

	annotate(g, di, lsv1alpha1.OperationAnnotation, "reconcil")
	g.Eventually(func(g Gomega) {
		evs := unknownOperationEvents(g, env.Client, ns, "typo")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(And(ContainSubstring(`"reconcil"`), ContainSubstring("reconcile, force-reconcile, abort")))
	}, timeout, interval).Should(Succeed())

	// More reconciles of the item (label edits pass the deployer's filter)
	// report nothing again. Each edit is waited for by a reconcile of its
	// own: edits in a row may be merged by the work queue into fewer
	// reconciles, so a count of reconciles after all of them would depend
	// on timing.
	for i := range 3 {
		before := len(rec.Traces(ns, "typo"))
		g.Expect(testutil.Update(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			cur.Labels["touch"] = strings.Repeat("x", i+1)
		})).To(Succeed())
		g.Eventually(func() int { return len(rec.Traces(ns, "typo")) }, timeout, interval).Should(BeNumerically(">", before),
			"a reconcile after label edit %d", i+1)
	}
	g.Consistently(func(g Gomega) {
		evs := unknownOperationEvents(g, env.Client, ns, "typo")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Series).To(BeNil(), "emitted once")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(get(g, di)().Annotations).To(HaveKeyWithValue(lsv1alpha1.OperationAnnotation, "reconcil"), "the user's annotation stays")
	g.Expect(get(g, di)().Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), "nothing else happens")

	annotate(g, di, lsv1alpha1.OperationAnnotation, "reconcle")
	g.Eventually(func(g Gomega) {
		g.Expect(unknownOperationEvents(g, env.Client, ns, "typo")).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())
}

// TestHugeErrorIsCutToTheBound: an error as large as a target cluster may
// answer (hundreds of kilobytes) reaches lastError and the Ready condition
// cut to status.MaxMessage, and the Event cut to lib.MaxEventNote (the
// events API refuses longer notes: the Event would be lost). The cut keeps
// the start (what failed) and the end (how to go on).
func TestHugeErrorIsCutToTheBound(t *testing.T) {
	huge := "the target said: " + strings.Repeat("blah ", 80_000)
	ns, g := setup(t, &behaviour{deleteFail: lib.ConfigError("HugeError", "%s", huge)})
	ctx := context.Background()
	di := newItem(ns, "huge")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseFailed))

	got := get(g, di)()
	wayOn := ContainSubstring(lsv1alpha1.DeleteWithoutUninstallAnnotation)
	g.Expect(len(got.Status.LastError.Message)).To(BeNumerically("<=", status.MaxMessage))
	g.Expect(got.Status.LastError.Message).To(And(HavePrefix("the target said: blah"), wayOn))
	ready := meta.FindStatusCondition(got.Status.Conditions, status.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(len(ready.Message)).To(BeNumerically("<=", status.MaxMessage))
	g.Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == "huge" && e.Reason == "HugeError" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(HaveLen(1), "the Event of the huge error is recorded")
		g.Expect(len(notes[0])).To(BeNumerically("<=", lib.MaxEventNote))
		g.Expect(notes[0]).To(And(HavePrefix("Delete: the target said: blah"), wayOn))
	}, timeout, interval).Should(Succeed())

	annotate(g, di, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}
