package mock_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/mock"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// One mock deployer serves every test; tests use their own namespaces.
	os.Exit(testutil.RunMain(m, &env, func(mgr ctrl.Manager) error {
		return mock.AddToManager(mgr, mock.Options{Version: "test", MinContinuousReconcileInterval: time.Second})
	}))
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

func setup(t *testing.T) (string, *WithT) {
	t.Helper()
	return testutil.Namespace(t, env), NewWithT(t)
}

const header = `"apiVersion":"mock.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration"`

func item(ns, name, config string) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       lsv1alpha1.DeployItemSpec{Type: mock.Type},
	}
	if config != "" {
		if !strings.Contains(config, `"kind"`) {
			config = "{" + header + "," + strings.TrimPrefix(config, "{")
		}
		di.Spec.Config = &runtime.RawExtension{Raw: []byte(config)}
	}
	return di
}

func get(g *WithT, di *lsv1alpha1.DeployItem) func() *lsv1alpha1.DeployItem {
	return func() *lsv1alpha1.DeployItem {
		out := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(di), out)).To(Succeed())
		return out
	}
}

func phase(p lsv1alpha1.Phase) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) lsv1alpha1.Phase { return di.Status.Phase }, Equal(p))
}

func noAnnotation(key string) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) map[string]string { return di.Annotations }, Not(HaveKey(key)))
}

func finished() OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) bool {
		return di.Status.JobID != "" && di.Status.JobID == di.Status.JobIDFinished && di.Status.Phase.IsFinal()
	}, BeTrue())
}

// settled: finished, and the metadata patch that follows the status write
// (finalizer, annotation removals) is done too. A job starts and ends in one
// status write, so "finished" alone can be seen before that patch.
func settled() OmegaMatcher {
	return And(finished(), WithTransform(func(di *lsv1alpha1.DeployItem) []string { return di.Finalizers },
		ContainElement(lsv1alpha1.Finalizer)))
}

func TestSucceededWithProviderStatusAndExport(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "ok", `{"apiVersion":"mock.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration",
		"providerStatus":{"apiVersion":"example.org/v1","kind":"Status","answer":42},
		"export":{"url":"https://example.org","replicas":3}}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())

	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	got := get(g, di)()
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	g.Expect(got.Status.LastReconcileTime).NotTo(BeNil())
	g.Expect(got.Status.Deployer).To(Equal(&lsv1alpha1.DeployerInformation{Name: mock.DefaultName, Identity: mock.DefaultName, Version: "test"}))
	g.Expect(got.Status.LastError).To(BeNil())
	g.Expect(got.Finalizers).To(ContainElement(lsv1alpha1.Finalizer))
	g.Expect(string(got.Status.ProviderStatus.Raw)).To(MatchJSON(`{"apiVersion":"example.org/v1","kind":"Status","answer":42}`))
	cond := got.Status.Conditions
	g.Expect(cond).To(ContainElement(And(
		HaveField("Type", lsv1alpha1.ConditionReady), HaveField("Status", metav1.ConditionTrue), HaveField("ObservedGeneration", got.Generation))))

	g.Expect(got.Status.ExportReference).To(Equal(&lsv1alpha1.ObjectReference{Name: "ok-export", Namespace: ns}))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ok-export"}, sec)).To(Succeed())
	g.Expect(string(sec.Data[mock.ExportKey])).To(MatchJSON(`{"url":"https://example.org","replicas":3}`))
	g.Expect(sec.OwnerReferences).To(ContainElement(HaveField("UID", got.UID)))

	// Outcomes are recorded as Events (a job start is not).
	g.Eventually(func(g Gomega) []string {
		return observabilitytest.EventReasons(g, env.Client, ns, "ok")
	}, timeout, interval).Should(ContainElement(lib.ReasonSucceeded))

	// A finished item stays finished: no further writes.
	rv := got.ResourceVersion
	g.Consistently(func() string { return get(g, di)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(rv))
}

func TestExecutionHandsOverJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "managed", `{"phase":"Succeeded"}`)
	di.Labels = map[string]string{lsv1alpha1.ManagedByExecutionLabel: "exec"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())

	// Managed by an execution and no job handed over: the deployer waits,
	// although generation (1) != observedGeneration (0).
	g.Consistently(get(g, di), 700*time.Millisecond, 100*time.Millisecond).Should(phase(""))

	// The execution controller hands over a job: reconcile-time + status.jobID.
	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Annotations = map[string]string{lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339)}
	})).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Status.JobID = "job-1"
	g.Expect(env.Client.Status().Patch(ctx, cur, patch, client.FieldOwner("execution-controller"))).To(Succeed())

	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished(), noAnnotation(lsv1alpha1.ReconcileTimeAnnotation)))
	got := get(g, di)()
	g.Expect(got.Status.JobID).To(Equal("job-1"), "the deployer keeps the execution's job ID")
	g.Expect(got.Status.JobIDFinished).To(Equal("job-1"))
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))

	// A second job.
	cur = get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Annotations = map[string]string{lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339)}
	})).To(Succeed())
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Status.JobID = "job-2"
	g.Expect(env.Client.Status().Patch(ctx, cur, patch, client.FieldOwner("execution-controller"))).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobIDFinished }, Equal("job-2")), noAnnotation(lsv1alpha1.ReconcileTimeAnnotation)))
	g.Expect(get(g, di)().Annotations).NotTo(HaveKey(lsv1alpha1.ReconcileTimeAnnotation))
}

func TestFailedPhase(t *testing.T) {
	ns, g := setup(t)
	di := item(ns, "fail", `{"phase":"Failed"}`)
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le := get(g, di)().Status.LastError
	g.Expect(le).NotTo(BeNil())
	g.Expect(le.Reason).To(Equal(mock.ReasonMockFailed))
	g.Expect(le.Operation).To(Equal(lib.OperationReconcile))
	g.Expect(le.Codes).To(ContainElement(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(le.LastTransitionTime.IsZero()).To(BeFalse())
}

func TestBadConfig(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	for name, cfg := range map[string]string{
		"unknown-field": `{"phase":"Succeeded","colour":"blue"}`,
		"bad-phase":     `{"phase":"Sleeping"}`,
		"wrong-kind":    `{"apiVersion":"manifest.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration"}`,
	} {
		g.Expect(env.Client.Create(ctx, item(ns, name, cfg))).To(Succeed())
	}
	for name, field := range map[string]string{"unknown-field": "colour", "bad-phase": "spec.config.phase", "wrong-kind": "apiVersion/kind"} {
		di := item(ns, name, "")
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()), name)
		le := get(g, di)().Status.LastError
		g.Expect(le.Reason).To(Equal(lib.ReasonInvalidConfig), name)
		g.Expect(le.Message).To(ContainSubstring(field), name)
		g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem), name)
	}
}

// TestDelayThenSucceeded: an item with a delay is Progressing, saying so,
// until the delay has passed, then Succeeded. Progressing lasts only the
// delay (1.5s), too short to be sure a poll sees it on a slow machine, so the
// test watches the item from before its creation and looks at every revision.
func TestDelayThenSucceeded(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	const delay = 1500 * time.Millisecond
	di := item(ns, "slow", `{"delay":"1500ms"}`)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &lsv1alpha1.DeployItemList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	created := time.Now()
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	// The phases the item went through (a repeated one once) and the Ready
	// message of its Progressing revisions, up to the end of the job.
	var phases []lsv1alpha1.Phase
	var progressing []string
	var succeededAt time.Time
	deadline := time.After(timeout)
	for succeededAt.IsZero() {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended; phases seen: %v", phases)
			}
			got, isItem := ev.Object.(*lsv1alpha1.DeployItem)
			if !isItem || got.Name != di.Name {
				continue
			}
			p := got.Status.Phase
			if p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
				phases = append(phases, p)
			}
			if p == lsv1alpha1.PhaseProgressing {
				if c := apimeta.FindStatusCondition(got.Status.Conditions, lsv1alpha1.ConditionReady); c != nil {
					progressing = append(progressing, c.Message)
				}
			}
			if p == lsv1alpha1.PhaseSucceeded && got.Status.JobID != "" && got.Status.JobID == got.Status.JobIDFinished {
				succeededAt = time.Now()
			}
		case <-deadline:
			t.Fatalf("not Succeeded within %s; phases seen: %v", timeout, phases)
		}
	}
	// (Init only if the job's start was written on its own, say after a
	// conflict.)
	g.Expect(phases).To(Or(
		HaveExactElements(lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseSucceeded),
		HaveExactElements(lsv1alpha1.PhaseInit, lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseSucceeded)),
		"Progressing while the delay runs, then Succeeded")
	g.Expect(progressing).To(ContainElement(ContainSubstring("mock delay")), "Progressing says why")
	// The delay counts from the job's pickup time, which the status keeps to
	// the second: the job ends at least delay-1s after the item was created
	// (without the delay it would end at once).
	g.Expect(succeededAt.Sub(created)).To(BeNumerically(">=", delay-time.Second))
}

func TestAbortProgressing(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "stuck", `{"phase":"Progressing"}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	g.Consistently(get(g, di), 500*time.Millisecond, 100*time.Millisecond).Should(phase(lsv1alpha1.PhaseProgressing))

	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Annotations = map[string]string{
			lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationAbort),
			lsv1alpha1.AbortTimeAnnotation: time.Now().UTC().Format(time.RFC3339),
		}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished(), noAnnotation(lsv1alpha1.OperationAnnotation)))
	got := get(g, di)()
	g.Expect(got.Status.LastError.Reason).To(Equal(lib.ReasonAborted))
	g.Expect(got.Status.LastError.Operation).To(Equal(lib.OperationAbort))
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.AbortTimeAnnotation))
}

func TestOperationReconcileStartsOwnJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "again", "")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	first := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, first, func(first *lsv1alpha1.DeployItem) {
		first.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(finished(), noAnnotation(lsv1alpha1.OperationAnnotation),
		WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobID }, Not(Equal(first.Status.JobID)))))
	got := get(g, di)()
	g.Expect(got.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation))
	g.Expect(got.Status.LastReconcileTime.Time).NotTo(BeTemporally("<", first.Status.LastReconcileTime.Time))
}

func TestGenerationChangeStartsJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "gen", `{"phase":"Failed"}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))

	cur := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config = &runtime.RawExtension{Raw: []byte(`{` + header + `,"phase":"Succeeded"}`)}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	got := get(g, di)()
	g.Expect(got.Status.ObservedGeneration).To(Equal(int64(2)))
	g.Expect(got.Status.LastError).To(BeNil())
}

// An item whose configuration stops exporting drops its export: the next
// job deletes the export Secret and clears status.exportRef, so no old
// export is carried forward.
func TestExportDroppedWhenNoLongerConfigured(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "exp", `{`+header+`,"export":{"url":"https://example.org"}}`)
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished(),
		WithTransform(func(d *lsv1alpha1.DeployItem) *lsv1alpha1.ObjectReference { return d.Status.ExportReference }, Not(BeNil()))))

	g.Expect(testutil.Update(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config = &runtime.RawExtension{Raw: []byte(`{` + header + `}`)}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished(),
		HaveField("Status.ObservedGeneration", int64(2)), HaveField("Status.ExportReference", BeNil())))
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "exp-export"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the export Secret is deleted: %v", err)
}

func TestForceReconcile(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "force", "")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	first := get(g, di)()
	g.Expect(testutil.Update(ctx, env.Client, first, func(first *lsv1alpha1.DeployItem) {
		first.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationForceReconcile)}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(finished(), phase(lsv1alpha1.PhaseSucceeded),
		WithTransform(func(d *lsv1alpha1.DeployItem) map[string]string { return d.Annotations }, Not(HaveKey(lsv1alpha1.OperationAnnotation)))))
	g.Expect(get(g, di)().Status.JobID).NotTo(Equal(first.Status.JobID))
}

func TestDeletion(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	for _, name := range []string{"del", "keep"} {
		di := item(ns, name, `{"export":{"a":1}}`)
		if name == "keep" {
			di.Annotations = map[string]string{lsv1alpha1.DeleteWithoutUninstallAnnotation: "true"}
		}
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
		g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{}))
		}, timeout, interval).Should(BeTrue(), name)
	}
	// The export Secret is deleted with the item, but kept with delete-without-uninstall.
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "del-export"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "del-export: %v", err)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-export"}, &corev1.Secret{})).To(Succeed())
}

// TestDeletionAfterTargetWentMissing: the mock installs nothing on its
// Target, so an item whose Target was deleted after its job (provider status
// and export written) is deleted all the same, export Secret included.
func TestDeletionAfterTargetWentMissing(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns}, Spec: lsv1alpha1.TargetSpec{Type: "example.org/any"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	// "nothing" records no provider status: it stands for an item that
	// installed nothing. "installed" records one, as a deployer does for
	// what it installed on the target.
	nothing := item(ns, "nothing", `{`+header+`,"export":{"a":1}}`)
	installed := item(ns, "installed", `{`+header+`,"providerStatus":{"apiVersion":"example.org/v1","kind":"Status","answer":42}}`)
	for _, di := range []*lsv1alpha1.DeployItem{nothing, installed} {
		di.Spec.Target = &lsv1alpha1.ObjectReference{Name: "t"}
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	}
	g.Expect(env.Client.Delete(ctx, target)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, nothing)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, installed)).To(Succeed())

	// Nothing installed: deleted without its Target, export Secret and all.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(nothing), &lsv1alpha1.DeployItem{}))
	}, timeout, interval).Should(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nothing-export"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing-export: %v", err)
	// Something installed: its uninstall needs the Target, so the deletion
	// fails (and keeps the finalizer) rather than leave it behind.
	g.Eventually(get(g, installed), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), HaveField("Status.LastError.Operation", "Delete"),
		HaveField("Status.LastError.Reason", lib.ReasonTargetNotFound)))
}

func TestOtherTypesUntouched(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	di := item(ns, "helm", `{"phase":"Succeeded"}`)
	di.Spec.Type = lsv1alpha1.HelmDeployItemType
	di.Annotations = map[string]string{
		lsv1alpha1.OperationAnnotation:     string(lsv1alpha1.OperationReconcile),
		lsv1alpha1.ReconcileTimeAnnotation: time.Now().UTC().Format(time.RFC3339),
	}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	created := get(g, di)()
	g.Consistently(func() string { return get(g, di)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(created.ResourceVersion))
}
