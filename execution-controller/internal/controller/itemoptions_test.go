package controller_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// An updateOnChangeOnly item whose spec did not change since its last
// successful job is not handed the next job, which still runs its
// dependents after it and succeeds; once its spec changes, it is handed the
// job again. The setting is on the DeployItem's spec as well.
func TestUpdateOnChangeOnlyItemSkipsJobsWhileUnchanged(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	rec := record(t, ns)

	base := mockItem("base", mockv1alpha1.ProviderConfiguration{})
	base.UpdateOnChangeOnly = true
	exec := newExecution(ns, "onchange", base, mockItem("app", mockv1alpha1.ProviderConfiguration{}, "base"))
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(getItem(g, ns, "onchange", "base").Spec.UpdateOnChangeOnly).To(BeTrue())

	second := rerun(t, exec)
	g.Expect(second.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(getItem(g, ns, "onchange", "base").Status.JobID).To(Equal(first.Status.JobID), "unchanged: not handed the job")
	rec.waitRecorded(t, succeeded("app", second.Status.JobID))
	g.Expect(rec.first(handed("base", second.Status.JobID))).To(Equal(-1))

	third := reconcileAgain(t, exec, func(e *lsv1alpha1.Execution) {
		e.Spec.DeployItems[0].Config = runtime.RawExtension{Raw: []byte(
			`{"apiVersion":"mock.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration","export":{"v":2}}`)}
	})
	g.Expect(third.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	rec.waitRecorded(t, succeeded("base", third.Status.JobID))
	// app waited for base's new job.
	g.Expect(rec.first(handed("app", third.Status.JobID))).To(BeNumerically(">", rec.first(succeeded("base", third.Status.JobID))))
}

// An updateOnChangeOnly item whose last job failed is handed the next one.
func TestUpdateOnChangeOnlyItemThatFailedIsRunAgain(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)

	item := mockItem("flaky", mockv1alpha1.ProviderConfiguration{Phase: string(lsv1alpha1.PhaseFailed)})
	item.UpdateOnChangeOnly = true
	exec := newExecution(ns, "onchange-failed", item)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	first := waitFinished(t, exec)
	g.Expect(first.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	second := rerun(t, exec)
	g.Expect(getItem(g, ns, "onchange-failed", "flaky").Status.JobIDFinished).To(Equal(second.Status.JobID))
}

// onDelete.skipUninstallIfClusterRemoved: an item whose Target is gone is
// deleted without uninstalling, so the execution's deletion completes
// instead of ending DeleteFailed (TargetNotFound), as it does without the
// setting (TestDeleteFailedThenDeleteWithoutUninstall).
func TestSkipUninstallIfClusterRemoved(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, testOptions())
	g := NewWithT(t)
	rec := record(t, ns)

	target := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"}, Spec: lsv1alpha1.TargetSpec{Type: "test/any"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	installed := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.org/v1","kind":"Installed"}`)}
	item := mockItem("app", mockv1alpha1.ProviderConfiguration{ProviderStatus: installed})
	item.Target = &lsv1alpha1.ObjectReference{Name: "cluster"}
	item.OnDelete = &lsv1alpha1.OnDeleteConfig{SkipUninstallIfClusterRemoved: true}
	exec := newExecution(ns, "clustergone", item)
	g.Expect(env.Client.Create(ctx, exec)).To(Succeed())
	g.Expect(waitFinished(t, exec).Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, target)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(target), &lsv1alpha1.Target{}))
	}).WithTimeout(eventually).WithPolling(poll).Should(BeTrue())

	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(exec), &lsv1alpha1.Execution{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "execution still there: %v", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	g.Expect(rec.first(func(e recorded) bool {
		return itemLabel(e) == "app" && e.item.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
	})).To(BeNumerically(">=", 0), "the item was deleted without uninstalling")
}
