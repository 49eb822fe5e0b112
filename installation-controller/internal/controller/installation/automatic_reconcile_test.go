package installation_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// autoTimeout bounds the waits for jobs an interval of a second or two
// schedules.
const autoTimeout = 30 * time.Second

// jobIDs are the distinct job IDs an installation's status showed, in order.
func (r *recorder) jobIDs(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Name != name || e.Status.JobID == "" {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != e.Status.JobID {
			out = append(out, e.Status.JobID)
		}
	}
	return out
}

func autoCondition(i *lsv1alpha1.Installation) string {
	c := apimeta.FindStatusCondition(i.Status.Conditions, lsv1alpha1.ConditionAutomaticReconcile)
	if c == nil {
		return ""
	}
	return c.Reason + ": " + c.Message
}

func withAutomaticReconcile(inst *lsv1alpha1.Installation, ar *lsv1alpha1.AutomaticReconcile) *lsv1alpha1.Installation {
	inst.Spec.AutomaticReconcile = ar
	return inst
}

func duration(s string) *lsv1alpha1.Duration { d := lsv1alpha1.Duration(s); return &d }

// A succeeded root runs again once succeededReconcile.interval has passed
// since its job ended, without the reconcile annotation; the condition says
// when the next job is due. An interval under the controller's minimum is
// raised to it, and the condition names the flag.
func TestSucceededReconcileStartsAJobAfterTheInterval(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	create(g, withAutomaticReconcile(newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...),
		&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: duration("500ms")}}))

	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Eventually(func() int { return len(rec.jobIDs("root")) }, autoTimeout, interval).Should(BeNumerically(">=", 3),
		"two more jobs, one per interval")
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		WithTransform(autoCondition, And(HavePrefix(installation.ReasonReconcileScheduled+": next job at "),
			ContainSubstring(installation.FlagMinAutomaticReconcileInterval)))))
	got, _ := getInst(ns, "root")()
	g.Expect(got.Status.AutomaticReconcileStatus).NotTo(BeNil())
	g.Expect(got.Status.AutomaticReconcileStatus.OnFailed).To(BeFalse())
	g.Expect(got.Status.AutomaticReconcileStatus.Generation).To(Equal(got.Generation))
	g.Expect(got.Annotations).To(HaveKeyWithValue(installation.StartedJobAnnotation, Not(BeEmpty())),
		"an automatic start is recorded as an annotated one is")
	g.Eventually(eventsOfType(context.Background(), ns, installation.ReasonAutomaticReconcile, corev1.EventTypeNormal), timeout, interval).
		Should(ContainElement("root"))
}

// A failed root is retried every failedReconcile.interval, at most
// numberOfReconciles times; then the condition says the retries are spent,
// and no job starts until the reconcile annotation starts one, which
// begins the count anew.
func TestFailedReconcileRetriesUpToNumberOfReconciles(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	create(g, withAutomaticReconcile(newInstallation(ns, "root", simpleBlueprint("      phase: Failed\n"), reconcileAnnotation...),
		&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{Interval: duration("1s"), NumberOfReconciles: ptr(int32(2))}}))

	g.Eventually(getInst(ns, "root"), autoTimeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		WithTransform(autoCondition, HavePrefix(installation.ReasonRetriesExhausted+": 2 automatic jobs"))))
	g.Eventually(func() []string { return rec.jobIDs("root") }, timeout, interval).Should(HaveLen(3), "the first job and two retries")
	got, _ := getInst(ns, "root")()
	g.Expect(got.Status.AutomaticReconcileStatus).To(HaveField("NumberOfReconciles", BeEquivalentTo(2)))
	g.Consistently(func() []string { return rec.jobIDs("root") }, "3s", interval).Should(HaveLen(3), "no retry past the limit")
	g.Eventually(eventsOfType(context.Background(), ns, installation.ReasonRetriesExhausted, corev1.EventTypeNormal), timeout, interval).
		Should(ContainElement("root"))

	annotate(g, got, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(func() []string { return rec.jobIDs("root") }, autoTimeout, interval).Should(HaveLen(6),
		"the annotated job, then two retries counted from one")
	g.Eventually(getInst(ns, "root"), autoTimeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		WithTransform(autoCondition, HavePrefix(installation.ReasonRetriesExhausted))))
	g.Consistently(func() []string { return rec.jobIDs("root") }, "2s", interval).Should(HaveLen(6))
}

// With reconcile-if-changed a root starts a job whenever its spec changed
// since its last job, and only then.
func TestReconcileIfChangedStartsAJobOnASpecChange(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	create(g, newInstallation(ns, "root", simpleBlueprint(""), lsv1alpha1.ReconcileIfChangedAnnotation, "true"))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.ObservedGeneration", BeEquivalentTo(1))))
	g.Consistently(func() []string { return rec.jobIDs("root") }, "2s", interval).Should(HaveLen(1), "no job without a change")

	inst, _ := getInst(ns, "root")()
	inst.Spec.Blueprint.Inline.Filesystem["notes.txt"] = "edited"
	g.Expect(env.Client.Update(context.Background(), inst)).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.ObservedGeneration", inst.Generation)))
	g.Eventually(func() []string { return rec.jobIDs("root") }, timeout, interval).Should(HaveLen(2))
	got, _ := getInst(ns, "root")()
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
}

// The touch annotation is removed and starts nothing.
func TestTouchIsRemovedAndStartsNoJob(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", simpleBlueprint("")))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(HaveField("Finalizers", ContainElement(lsv1alpha1.Finalizer)))
	inst, _ := getInst(ns, "root")()
	annotate(g, inst, lsv1alpha1.TouchAnnotation, "1")
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(HaveField("Annotations", Not(HaveKey(lsv1alpha1.TouchAnnotation))))
	g.Consistently(getInst(ns, "root"), "2s", interval).Should(HaveField("Status.JobID", BeEmpty()))
}

// Intervals and limits that cannot work are refused at apply.
func TestAutomaticReconcileBadInputIsRefusedAtApply(t *testing.T) {
	ns, g := setup(t)
	for name, c := range map[string]struct {
		ar  *lsv1alpha1.AutomaticReconcile
		msg string
	}{
		"negative":   {&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{Interval: duration("-5m")}}, "spec.automaticReconcile.failedReconcile.interval"},
		"none":       {&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: duration("none")}}, "interval must be a positive duration"},
		"zero":       {&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: duration("0s")}}, "interval must be a positive duration"},
		"unparsable": {&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: duration("five minutes")}}, "spec.automaticReconcile.succeededReconcile.interval"},
		"overflow":   {&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{Interval: duration("99999999999h")}}, "spec.automaticReconcile.succeededReconcile.interval"},
		"limit":      {&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{NumberOfReconciles: ptr(int32(-1))}}, "spec.automaticReconcile.failedReconcile.numberOfReconciles"},
		"cron":       {&lsv1alpha1.AutomaticReconcile{FailedReconcile: &lsv1alpha1.FailedReconcile{CronSpec: "hourly"}}, "spec.automaticReconcile.failedReconcile.cronSpec"},
	} {
		err := env.Client.Create(context.Background(), withAutomaticReconcile(newInstallation(ns, name, simpleBlueprint("")), c.ar))
		g.Expect(err).To(MatchError(ContainSubstring(c.msg)), name)
	}
}

// A cron schedule the schema lets through but that names no time (minute
// 61) is reported in the condition and one Warning event; a valid one
// schedules the job at its next time.
func TestCronSpecIsScheduledOrReported(t *testing.T) {
	ns, g := setup(t)
	create(g, withAutomaticReconcile(newInstallation(ns, "bad", simpleBlueprint(""), reconcileAnnotation...),
		&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{CronSpec: "61 * * * *"}}))
	create(g, withAutomaticReconcile(newInstallation(ns, "good", simpleBlueprint(""), reconcileAnnotation...),
		&lsv1alpha1.AutomaticReconcile{SucceededReconcile: &lsv1alpha1.SucceededReconcile{CronSpec: "0 0 1 1 *"}}))

	g.Eventually(getInst(ns, "bad"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		WithTransform(autoCondition, Equal(installation.ReasonScheduleInvalid+
			`: spec.automaticReconcile.succeededReconcile.cronSpec "61 * * * *": minute field "61": "61" is not a value from 0 to 59`))))
	g.Eventually(eventsOfType(context.Background(), ns, installation.ReasonScheduleInvalid, corev1.EventTypeWarning), timeout, interval).
		Should(ConsistOf("bad"))
	g.Eventually(getInst(ns, "good"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		WithTransform(autoCondition, MatchRegexp(`^Scheduled: next job at \d{4}-01-01T00:00:00Z \(succeededReconcile on schedule "0 0 1 1 \*"\)$`))))
}

func ptr[T any](v T) *T { return &v }
