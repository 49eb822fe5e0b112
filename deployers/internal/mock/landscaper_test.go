package mock_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/mock"
	"github.com/terrace-dev/terrace/deployers/lib"
)

func lastError(g *WithT, di *lsv1alpha1.DeployItem) *lsv1alpha1.Error {
	le := get(g, di)().Status.LastError
	g.Expect(le).NotTo(BeNil())
	return le
}

// TestInitialPhase: without phase, initialPhase is the phase the job ends in
// (Failed naming the field, Progressing until the item is aborted); phase,
// when set, wins.
func TestInitialPhase(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	failed := item(ns, "initial-failed", `{"initialPhase":"Failed"}`)
	running := item(ns, "initial-progressing", `{"initialPhase":"Progressing"}`)
	overruled := item(ns, "phase-wins", `{"initialPhase":"Failed","phase":"Succeeded"}`)
	for _, di := range []*lsv1alpha1.DeployItem{failed, running, overruled} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}

	g.Eventually(get(g, failed), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le := lastError(g, failed)
	g.Expect(le.Reason).To(Equal(mock.ReasonMockFailed))
	g.Expect(le.Message).To(ContainSubstring("spec.config.initialPhase: the mock configuration asks for phase Failed"))

	g.Eventually(get(g, overruled), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))

	g.Eventually(get(g, running), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	g.Consistently(get(g, running), time.Second, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	cur := get(g, running)()
	cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationAbort)}
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	g.Eventually(get(g, running), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	g.Expect(lastError(g, running).Reason).To(Equal(lib.ReasonAborted))
}

// TestContinuousReconcile: a Succeeded item with continuousReconcile.every
// runs again without any change to it (same job, later lastReconcileTime),
// and writes its export again: a deleted export Secret comes back.
func TestContinuousReconcile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "again", `{"continuousReconcile":{"every":"1s"},"export":{"n":1}}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	first := get(g, di)()
	g.Expect(first.Status.ExportReference).NotTo(BeNil())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Status.ExportReference.Name}}
	g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret) }, timeout, interval).Should(Succeed())
	g.Eventually(func() time.Time { return get(g, di)().Status.LastReconcileTime.Time }, timeout, interval).
		Should(BeTemporally(">", first.Status.LastReconcileTime.Time))
	got := get(g, di)()
	g.Expect(got.Status.JobID).To(Equal(first.Status.JobID), "a scheduled run is not a new job")
	g.Expect(got).To(phase(lsv1alpha1.PhaseSucceeded))
}

// TestContinuousReconcileBadInput: a malformed or too frequent
// continuousReconcile fails the item naming the field (and the bound with
// its flag), and the Failed item is not run again.
func TestContinuousReconcileBadInput(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	cases := map[string]string{
		"both":      "spec.config.continuousReconcile: set cron or every, not both",
		"bad-cron":  "spec.config.continuousReconcile.cron:",
		"too-often": "spec.config.continuousReconcile.every: 10ms is below the deployer's minimum of 1s (--min-continuous-reconcile-interval)",
		"negative":  "spec.config.continuousReconcile.every: -1s is not a positive duration",
	}
	configs := map[string]string{
		"both":      `{"continuousReconcile":{"every":"1h","cron":"0 * * * *"}}`,
		"bad-cron":  `{"continuousReconcile":{"cron":"every full moon"}}`,
		"too-often": `{"continuousReconcile":{"every":"10ms"}}`,
		"negative":  `{"continuousReconcile":{"every":"-1s"}}`,
	}
	for name, cfg := range configs {
		g.Expect(env.Client.Create(ctx, item(ns, name, cfg))).To(Succeed())
	}
	for name, msg := range cases {
		di := item(ns, name, "")
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()), name)
		le := lastError(g, di)
		g.Expect(le.Reason).To(Equal(lib.ReasonInvalidConfig), name)
		g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem), name)
		g.Expect(le.Message).To(ContainSubstring(msg), name)
	}
	rv := get(g, item(ns, "too-often", ""))().ResourceVersion
	g.Consistently(func() string { return get(g, item(ns, "too-often", ""))().ResourceVersion }, 2*time.Second, 100*time.Millisecond).
		Should(Equal(rv), "the Failed item is not run again")
}

// TestBadInitialPhase: an initialPhase the mock does not know fails the item
// naming the field.
func TestBadInitialPhase(t *testing.T) {
	ns, g := setup(t)
	di := item(ns, "bad-initial", `{"initialPhase":"Init"}`)
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	g.Expect(lastError(g, di).Message).To(ContainSubstring(`spec.config.initialPhase: "Init" is not one of Succeeded, Failed, Progressing`))
}
