package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// A normal error keeps the phase and is retried: while a ResourceQuota
// allows no Executions in the namespace, the API server refuses to create
// the installation's execution in Init. The job stays in Init with lastError
// TransientError and does not end; once the quota is gone, a retry (nothing
// else wakes the installation: the controller does not watch quotas)
// creates the execution and the same job goes on to Succeeded.
func TestNormalErrorKeepsPhaseAndRetries(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	ctx := context.Background()
	const executions corev1.ResourceName = "count/executions.landscaper.gardener.cloud"
	quota := &corev1.ResourceQuota{ObjectMeta: metaNS(ns, "no-executions"),
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{executions: resource.MustParse("0")}}}
	create(g, quota)
	// envtest runs no quota controller: write the usage it would compute.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{executions: resource.MustParse("0")}}
	g.Expect(env.Client.Status().Update(ctx, quota)).To(Succeed())

	create(g, newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInit),
		HaveField("Status.LastError.Reason", "TransientError"),
		HaveField("Status.LastError.Operation", string(lsv1alpha1.PhaseInit)),
		HaveField("Status.LastError.Message", And(ContainSubstring("creating execution"), ContainSubstring("quota")))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	inst, _ := getInst(ns, "root")()
	job := inst.Status.JobID
	g.Expect(job).NotTo(BeEmpty())
	g.Expect(inst.Status.JobIDFinished).NotTo(Equal(job), "a normal error does not end the job")
	g.Expect(inst.Status.LastError.Codes).To(BeEmpty())
	_, err := getExec(ns, "root")()
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Eventually(func() ([]string, error) {
		evs := &corev1.EventList{}
		err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": "Retrying"})
		var objs []string
		for _, e := range evs.Items {
			objs = append(objs, e.InvolvedObject.Name)
		}
		return objs, err
	}, timeout, interval).Should(ContainElement("root"))

	g.Expect(env.Client.Delete(ctx, quota)).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobID", job), HaveField("Status.LastError", BeNil())),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	_, err = getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	// The watch saw the whole flow of one job (the phases that need no
	// waiting share a status write), errors only from Init, and never a
	// finished job before Succeeded.
	g.Expect(rec.phases("root")).To(HaveExactElements(lsv1alpha1.PhaseInit, lsv1alpha1.PhaseProgressing, lsv1alpha1.PhaseSucceeded))
	g.Expect(rec.index(func(i *lsv1alpha1.Installation) bool {
		return i.Name == "root" && i.Status.LastError != nil && (i.Status.LastError.Reason != "TransientError" || i.Status.LastError.Operation != string(lsv1alpha1.PhaseInit))
	})).To(Equal(-1))
	g.Expect(rec.index(func(i *lsv1alpha1.Installation) bool {
		return i.Name == "root" && i.Status.JobIDFinished == job && i.Status.Phase != lsv1alpha1.PhaseSucceeded
	})).To(Equal(-1))
}
