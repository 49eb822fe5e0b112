package suite

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// itemTree renders the root installation "items": its own execution with
// the given items and a sub-installation "one" whose blueprint is sub
// (importing the root's Target when subImportsTarget).
func itemTree(items, sub string, subImportsTarget bool) []byte {
	subImports := ""
	if subImportsTarget {
		subImports = indent("imports:\n  targets:\n  - name: cluster\n    target: cluster", 12)
	}
	return fmt.Appendf(nil, `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata:
  name: items
  annotations:
    landscaper.gardener.cloud/operation: reconcile
spec:
  imports:
    targets:
    - name: cluster
      target: cluster
  blueprint:
    inline:
      filesystem:
        blueprint.yaml: |
          imports:
          - name: cluster
            type: target
            targetType: landscaper.gardener.cloud/kubernetes-cluster
          subinstallations:
          - name: one
            blueprint: {dir: sub}
%s          deployExecutions:
          - name: default
            type: GoTemplate
            template: |
              deployItems:
%s        sub/blueprint.yaml: |
%s`, subImports, indent(items, 14), indent(sub, 10))
}

// subWithItem is the sub-installation's blueprint deploying item.
func subWithItem(item string) string {
	return `imports:
- name: cluster
  type: target
  targetType: landscaper.gardener.cloud/kubernetes-cluster
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + indent(item, 4)
}

// events lists the events of namespace ns as "Kind/name type reason".
func events(g Gomega, ctx context.Context, ns string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	out := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Type+" "+e.Reason)
	}
	return out
}

func configMapGone(ctx context.Context, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		return env.isGone(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
}

var _ = Describe("Installations: deploy items", func() {
	It("creates items with the job and uninstalls them: hand-deleted execution, orphans, deletion job", func(ctx SpecContext) {
		ns := newNamespace(ctx, "items")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		// A failing root beside the tree, for the failure events.
		broken := createInstallation(ctx, ns, installation("broken", mockItem("broken", "phase: Failed")))
		full := itemTree(configMapItem("kept", ns, "kept")+configMapItem("dropped", ns, "dropped"),
			subWithItem(configMapItem("sub", ns, "sub")), true)
		root := createInstallation(ctx, ns, full)

		By("job 1: the execution creates the items; items, executions and installations finish the job")
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
		job1 := root.Status.JobID
		sub := &lsv1alpha1.Installation{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "items-one"}, sub)).To(Succeed())
		Expect(sub.Status.JobIDFinished).To(Equal(job1))
		for _, name := range []string{"items", "items-one"} {
			exec := &lsv1alpha1.Execution{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, exec)).To(Succeed())
			Expect(exec.Status.JobIDFinished).To(Equal(job1), name)
			Expect(exec.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), name)
		}
		items := itemsOf(ctx, ns)
		for name, exec := range map[string]string{"kept": "items", "dropped": "items", "sub": "items-one"} {
			di := items[name]
			Expect(di.Labels).To(HaveKeyWithValue(lsv1alpha1.ManagedByExecutionLabel, exec), name)
			Expect(di.Status.JobIDFinished).To(Equal(job1), name)
			Expect(di.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), name)
			if env.Local() {
				Expect(di.Annotations).To(HaveKey("terrace.dev/trace-context"), "tracing is on: %s", name)
			}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})).To(Succeed(), name)
		}

		By("events: Succeeded on executions and items; the failing mock item fails its execution")
		brokenItem := items["broken"].Name
		Eventually(events).WithContext(ctx).WithArguments(ctx, ns).Should(ContainElements(
			"Execution/items Normal Succeeded", "Execution/items-one Normal Succeeded",
			"DeployItem/"+items["kept"].Name+" Normal Succeeded", "DeployItem/"+items["sub"].Name+" Normal Succeeded",
			"DeployItem/"+brokenItem+" Warning MockFailed", "DeployItem/"+brokenItem+" Warning Failed",
			"Execution/broken Warning DeployItemsFailed", "Execution/broken Warning Failed",
		))
		Expect(env.Client.Delete(ctx, broken)).To(Succeed())

		By("job 2: a hand-deleted execution's item is uninstalled, not adopted: the recreated execution's item is new")
		oldKept := items["kept"]
		Expect(env.Client.Delete(ctx, &lsv1alpha1.Execution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "items"}})).To(Succeed())
		annotate(ctx, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
		Eventually(func(g Gomega) string {
			g.Expect(installationJob(ctx, ns, root.Name)(g)).To(Equal(lsv1alpha1.PhaseSucceeded))
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
			return root.Status.JobID
		}).WithContext(ctx).ShouldNot(Equal(job1), func() string { return describe(ctx, ns) })
		job2 := root.Status.JobID
		kept := itemsOf(ctx, ns)["kept"]
		Expect(kept.UID).NotTo(Equal(oldKept.UID))
		Expect(kept.Status.JobIDFinished).To(Equal(job2))
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &corev1.ConfigMap{})).To(Succeed())

		By("job 3: items the blueprints no longer render are uninstalled, the sub's with the Target its parent no longer hands it")
		applyYAML(ctx, ns, itemTree(configMapItem("kept", ns, "kept"), "imports: []\n", false))
		Eventually(func(g Gomega) string {
			g.Expect(installationJob(ctx, ns, root.Name)(g)).To(Equal(lsv1alpha1.PhaseSucceeded))
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
			return root.Status.JobID
		}).WithContext(ctx).ShouldNot(Equal(job2), func() string { return describe(ctx, ns) })
		job3 := root.Status.JobID
		Expect(configMapGone(ctx, ns, "dropped")()).To(BeTrue(), "dropped is uninstalled")
		Expect(configMapGone(ctx, ns, "sub")()).To(BeTrue(), "sub is uninstalled")
		Eventually(env.isGone).WithContext(ctx).WithArguments(broken).Should(BeTrue())
		Expect(itemsOf(ctx, ns)).To(ConsistOf(HaveField("UID", kept.UID)))
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "items-one"}, sub)).To(Succeed())
		Expect(sub.Status.JobIDFinished).To(Equal(job3))

		By("deleting the root: the deletion job uninstalls the items, and everything goes")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(root).Should(BeTrue(), func() string { return describe(ctx, ns) })
		Expect(configMapGone(ctx, ns, "kept")()).To(BeTrue(), "kept is uninstalled")
		executions := &lsv1alpha1.ExecutionList{}
		Expect(env.Client.List(ctx, executions, client.InNamespace(ns))).To(Succeed())
		Expect(executions.Items).To(BeEmpty())
		Expect(itemsOf(ctx, ns)).To(BeEmpty())
		if !env.Local() {
			return
		}
		// The deletion job's trace: the one holding a span of the root's job
		// that none of the install jobs is.
		installJobs := map[string]bool{job1: true, job2: true, job3: true}
		Eventually(func(g Gomega) {
			trace := traceOf(readSpans(), func(s span) bool {
				return s.service == "installation-controller" && s.attrs["k8s.namespace.name"] == ns &&
					s.attrs["terrace.name"] == root.Name && s.attrs["terrace.job_id"] != "" && !installJobs[s.attrs["terrace.job_id"]]
			})
			g.Expect(trace).NotTo(BeEmpty(), "an installation-controller span of the deletion job")
			g.Expect(services(trace)).To(ContainElements("installation-controller", "execution-controller", "manifest-deployer"), dumpTrace(trace))
			names := map[string]bool{}
			for _, s := range trace {
				names[s.Name] = true
			}
			g.Expect(names).To(HaveKey("DeployItem.Delete"), dumpTrace(trace))
			g.Expect(expectConnected(g, trace).service).To(Equal("installation-controller"), dumpTrace(trace))
		}).WithContext(ctx).Should(Succeed())
	})
})
