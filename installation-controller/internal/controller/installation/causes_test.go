package installation_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// A job whose sub-objects failed names the cause in its own lastError (the
// Message column of `kubectl get inst -o wide`), not only which sub-object
// failed: the execution's reason and message, and from a sub-installation
// the cause found at the bottom of its tree. A sub-installation that only
// failed because its predecessor did does not hide the predecessor's cause.
func TestSubObjectsFailedNamesTheCause(t *testing.T) {
	ns, g := setup(t)
	cyclic := map[string]string{"blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: a
      type: landscaper.gardener.cloud/mock
      dependsOn: [b]
      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration}
    - name: b
      type: landscaper.gardener.cloud/mock
      dependsOn: [a]
      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration}
`}
	create(g, newInstallation(ns, "cyclic", cyclic, reconcileAnnotation...))

	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	fs := treeFS()
	// a's item fails; b imports a's export and fails PredecessorFailed.
	fs["a/blueprint.yaml"] = strings.Replace(fs["a/blueprint.yaml"], "        export:\n          host: a.example.com\n", "        phase: Failed\n", 1)
	tree := newInstallation(ns, "tree", fs, reconcileAnnotation...)
	tree.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	create(g, tree)

	inst := failsWithSubObjects(g, ns, "cyclic")
	g.Expect(inst.Status.LastError.Message).To(MatchRegexp(
		`^sub-objects failed: execution cyclic \(Failed\); cause: execution cyclic: CyclicDependencies: cyclic dependencies: (a -> b -> a|b -> a -> b)`))

	inst = failsWithSubObjects(g, ns, "tree")
	// The execution controller may say more after "server" (bounded).
	g.Expect(inst.Status.LastError.Message).To(HavePrefix("sub-objects failed: sub-installation tree-a (Failed), sub-installation tree-b (Failed); " +
		"cause: sub-installation tree-a → execution tree-a: DeployItemsFailed: deploy items failed: server"))
	// The Ready condition says the same.
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady),
		HaveField("Message", inst.Status.LastError.Message))))
	a, _ := getInst(ns, "tree-a")()
	g.Expect(a.Status.LastError.Message).To(HavePrefix("sub-objects failed: execution tree-a (Failed); cause: execution tree-a: DeployItemsFailed: deploy items failed: server"))
}

func failsWithSubObjects(g Gomega, ns, name string) *lsv1alpha1.Installation {
	g.Eventually(getInst(ns, name), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.LastError.Reason", "SubObjectsFailed")), func() string { i, _ := getInst(ns, name)(); return lastError(i) })
	inst, _ := getInst(ns, name)()
	return inst
}

// An operation annotation value an Installation does not know (a typo) is
// not ignored silently: one Warning event UnknownOperation per distinct
// value names it and the accepted values, however often the installation is
// reconciled; the annotation stays.
func TestUnknownOperationIsWarnedOnce(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, newInstallation(ns, "root", simpleBlueprint(""), lsv1alpha1.OperationAnnotation, "reconcil"))
	notes := func() ([]string, error) {
		evs := &corev1.EventList{}
		err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": "UnknownOperation"})
		var out []string
		for _, e := range evs.Items {
			g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(e.InvolvedObject.Name).To(Equal("root"))
			// An event emitted again for the same object version is
			// counted in its series.
			g.Expect(e.Series).To(BeNil(), "event emitted more than once: %s", e.Message)
			out = append(out, e.Message)
		}
		return out, err
	}
	want := func(value string) string {
		return `annotation landscaper.gardener.cloud/operation: unknown value "` + value + `" is ignored (the annotation is left in place); Installations accept reconcile, interrupt`
	}
	g.Eventually(notes, timeout, interval).Should(ConsistOf(want("reconcil")))
	inst, _ := getInst(ns, "root")()
	g.Expect(inst.Annotations).To(HaveKeyWithValue(lsv1alpha1.OperationAnnotation, "reconcil"))
	g.Expect(inst.Status.JobID).To(BeEmpty())

	annotate(g, inst, lsv1alpha1.OperationAnnotation, "Reconcile")
	g.Eventually(notes, timeout, interval).Should(ConsistOf(want("reconcil"), want("Reconcile")))

	// The deletion job reconciles the installation several times, each
	// with the annotation still there: no event more.
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
	g.Consistently(notes, "2s", interval).Should(ConsistOf(want("reconcil"), want("Reconcile")))
}

// A deletion that failed names its cause on the root as well: the reason and
// message of the failed execution (which quotes its item's), so the way out
// the item gives (create the Target again, or delete-without-uninstall) is
// readable where the user looks, and the advice says to fix it before
// retrying. The Ready condition says the same.
func TestSubObjectsDeleteFailedNamesTheCause(t *testing.T) {
	ns, g := setup(t)
	rootWhoseTargetWent(g, ns)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseDeleteFailed),
		HaveField("Status.LastError.Reason", "SubObjectsDeleteFailed")), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	inst, _ := getInst(ns, "root")()
	msg := inst.Status.LastError.Message
	g.Expect(msg).To(HavePrefix("deleting sub-objects failed: execution root (DeleteFailed); cause: execution root: DeleteFailed: deleting deploy items failed: item; item: TargetNotFound: "))
	g.Expect(msg).To(ContainSubstring(lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true"`))
	g.Expect(msg).To(HaveSuffix("; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with " +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`))
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady),
		HaveField("Message", msg))))
}

// A sub-object deleted by hand whose deletion fails fails the next job
// quoting the cause, as SubObjectsDeleteFailed does (the execution's list of
// failed items, then the item's TargetNotFound and its way out), with the
// advice to fix it before retrying, not only "(see its status)", which would
// send the user to an object they had deleted. The Ready condition says the
// same.
func TestHandDeletedSubObjectWhoseDeletionFailedNamesTheCause(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	create(g, newInstallation(ns, "root", installedItemFS(), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster")})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, &lsv1alpha1.Target{}))
	}, timeout, interval).Should(BeTrue())
	exec, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, exec)).To(Succeed())

	root, _ := getInst(ns, "root")()
	first := root.Status.JobID
	annotate(g, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed), HaveField("Status.JobID", Not(Equal(first))),
		HaveField("Status.LastError.Reason", "SubObjectsDeleteFailed")), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	inst, _ := getInst(ns, "root")()
	msg := inst.Status.LastError.Message
	g.Expect(msg).To(HavePrefix("execution root was deleted by hand and its deletion failed; cause: execution root: DeleteFailed: deleting deploy items failed: item; item: TargetNotFound: "))
	g.Expect(msg).To(ContainSubstring(lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true"`))
	g.Expect(msg).To(HaveSuffix("; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with " +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`))
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady),
		HaveField("Status", metav1.ConditionFalse), HaveField("Message", msg))))
}

// A root installation whose job failed does not start a job when its spec
// changes (seed 002: only the reconcile annotation starts one), but it says
// so: the Ready condition, of the new generation, says the spec changed
// since the failed job and which command starts a new one, before the
// failure's message, and one Normal event ReconcileAnnotationNeeded says it
// once per generation, not on every reconcile, so the user sees that the
// fixed spec does not run. Ready's reason is ReconcileAnnotationNeeded, not
// the failed job's (TemplateFailed, which with the new observedGeneration
// would read as the new spec failing); the message keeps the failure. The command
// carries --overwrite: an operation annotation left in place (here a typo)
// makes kubectl refuse it otherwise.
func TestFailedRootWhoseSpecChangedSaysHowToStartANewJob(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	broken := map[string]string{"blueprint.yaml": `deployExecutions:
- name: broken
  type: GoTemplate
  template: |
    deployItems: {{ fail "boom" }}
`}
	create(g, newInstallation(ns, "root", broken, reconcileAnnotation...))
	failed := failsWith(g, ns, "root", "TemplateFailed", "boom")
	job, failure := failed.Status.JobID, failed.Status.LastError.Message
	annotate(g, failed, lsv1alpha1.OperationAnnotation, "reconcil")
	hints := func() ([]string, error) {
		evs := &corev1.EventList{}
		err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": "ReconcileAnnotationNeeded"})
		var out []string
		for _, e := range evs.Items {
			g.Expect(e.Type).To(Equal(corev1.EventTypeNormal))
			g.Expect(e.Series).To(BeNil(), "event emitted more than once: %s", e.Message)
			out = append(out, e.Message)
		}
		return out, err
	}
	hint := func(gen int) string {
		return fmt.Sprintf("the spec changed since job %s failed (generation %d; the job ran generation 1), and no job starts on its own: "+
			"`kubectl annotate installation root landscaper.gardener.cloud/operation=reconcile --overwrite -n %s` starts a new job", job, gen, ns)
	}
	edit := func(gen int) {
		inst, _ := getInst(ns, "root")()
		inst.Spec.Blueprint.Inline.Filesystem = simpleBlueprint(fmt.Sprintf("      n: %d", gen))
		g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
		g.Expect(inst.Generation).To(BeEquivalentTo(gen))
		g.Eventually(getInst(ns, "root"), timeout, interval).Should(WithTransform(readyOf, And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "ReconcileAnnotationNeeded"),
			HaveField("Message", hint(gen)+"; the job failed: TemplateFailed: "+failure), HaveField("ObservedGeneration", BeEquivalentTo(gen)))))
		// lastError still tells the failed job's cause.
		g.Expect(getInst(ns, "root")()).To(HaveField("Status.LastError", And(HaveField("Reason", "TemplateFailed"), HaveField("Message", failure))))
	}
	g.Expect(hints()).To(BeEmpty(), "no hint before the spec changed")
	edit(2)
	g.Eventually(hints, timeout, interval).Should(ConsistOf(hint(2)))
	edit(3)
	g.Eventually(hints, timeout, interval).Should(ConsistOf(hint(2), hint(3)))
	// Reconciles that change no spec (an annotation) say nothing more; the job
	// stays the failed one.
	inst, _ := getInst(ns, "root")()
	annotate(g, inst, "example.org/touched", "yes")
	g.Consistently(hints, "2s", interval).Should(ConsistOf(hint(2), hint(3)))
	g.Expect(getInst(ns, "root")()).To(And(finishedIn(lsv1alpha1.PhaseFailed), HaveField("Status.JobID", job)))
}

// The way out a deployer ends a failed deletion's message with survives the
// whole chain up to the root: execution → sub-installation → root, in a
// realistic stack whose names are long (a Target name of 226 characters,
// item names of up to 63) and whose items all fail, so that every level
// quotes a long message: the execution's (with its list of failed items and
// their causes, here as the execution stub words them) is cut in the middle
// by the installation controller, which keeps its end: were only the start
// kept, the sub-installation, and the root after it, would lose the
// annotations that say how to go on.
func TestDeployersWayOutSurvivesTheChainToTheRoot(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target := strings.Repeat("eu-central-1-production-", 9) + "cluster-01"
	items := []string{
		"monitoring-stack-prometheus-operator-custom-resource-definition",
		"monitoring-stack-prometheus-operator-deployment-and-service",
		"monitoring-stack-prometheus-server-statefulset-with-storage",
		"monitoring-stack-alertmanager-cluster-with-notification-routes",
		"monitoring-stack-grafana-deployment-with-datasources",
		"monitoring-stack-grafana-dashboards-kubernetes-cluster-overview",
		"monitoring-stack-node-exporter-daemonset-on-every-worker-node",
		"monitoring-stack-kube-state-metrics-deployment-and-rbac-rules",
		"monitoring-stack-blackbox-exporter-for-external-http-endpoints",
		"monitoring-stack-pushgateway-for-batch-jobs-and-cron-workloads",
	}
	var yaml strings.Builder
	for _, item := range items {
		g.Expect(len(item)).To(BeNumerically("<=", 63), item)
		yaml.WriteString(`    - name: ` + item + `
      type: landscaper.gardener.cloud/mock
      target:
        name: ` + target + `
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          apiVersion: example.org/v1
          kind: Installed
`)
	}
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, target), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	fs := map[string]string{
		"blueprint.yaml": "subinstallations:\n- name: monitoring\n  blueprint: {dir: monitoring}\n",
		"monitoring/blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + yaml.String(),
	}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, target)})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: target}, &lsv1alpha1.Target{}))
	}, timeout, interval).Should(BeTrue())
	root, _ := getInst(ns, "root")()
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseDeleteFailed),
		HaveField("Status.LastError.Reason", "SubObjectsDeleteFailed")), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	// The execution's message is longer than the installation quotes: cut
	// there.
	wayOut := `or annotate the item with ` + lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" to delete it without uninstalling`
	exec, err := getExec(ns, "root-monitoring")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.Status.LastError).NotTo(BeNil())
	execMsg := exec.Status.LastError.Message
	g.Expect(execMsg).To(And(HavePrefix("deleting deploy items failed: "+strings.Join(sorted(items), ", ")+"; "), HaveSuffix(wayOut)))
	g.Expect(len(execMsg)).To(BeNumerically(">", 1024), "longer than the installation controller quotes")

	advice := "; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with " +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`
	// The sub-installation quotes the execution's start and end.
	sub, _ := getInst(ns, "root-monitoring")()
	_, quoted, _ := strings.Cut(sub.Status.LastError.Message, "; cause: execution root-monitoring: DeleteFailed: ")
	g.Expect(sub.Status.LastError.Message).To(HavePrefix("deleting sub-objects failed: execution root-monitoring (DeleteFailed); cause: execution root-monitoring: DeleteFailed: deleting deploy items failed: "))
	g.Expect(quoted).To(HaveSuffix(wayOut + advice))
	head, tail, cut := strings.Cut(strings.TrimSuffix(quoted, advice), " … ")
	g.Expect(cut).To(BeTrue(), quoted)
	g.Expect(execMsg).To(And(HavePrefix(head), HaveSuffix(tail)))
	// The root quotes the sub-installation's cause, its end whole.
	inst, _ := getInst(ns, "root")()
	msg := inst.Status.LastError.Message
	g.Expect(msg).To(Equal("deleting sub-objects failed: sub-installation root-monitoring (DeleteFailed); cause: sub-installation root-monitoring → execution root-monitoring: DeleteFailed: " + quoted))
	g.Expect(msg).To(HaveSuffix(wayOut + advice))
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady), HaveField("Message", msg))))
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
