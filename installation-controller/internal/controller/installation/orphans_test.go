package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// A sub-installation that leaves the blueprint is marked
// delete-ignore-successors, deleted in Init, and its deletion runs in
// CleanupOrphaned before the job goes on.
func TestOrphanedSubInstallationsAreDeleted(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	names := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "names"), Data: lsv1alpha1.NewAnyJSON([]byte(`["one","two"]`))}
	create(g, names)
	fs := map[string]string{
		"blueprint.yaml":     subPerNameBlueprint,
		"sub/blueprint.yaml": simpleBlueprint("")["blueprint.yaml"],
	}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "names", DataRef: "names"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(gone(getInst(ns, "root-two"))()).To(BeFalse())

	names.Data = lsv1alpha1.NewAnyJSON([]byte(`["one"]`))
	g.Expect(env.Client.Update(context.Background(), names)).To(Succeed())
	inst, _ = getInst(ns, "root")()
	first := inst.Status.JobID
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))))
	g.Expect(gone(getInst(ns, "root-two"))()).To(BeTrue())
	g.Expect(gone(getInst(ns, "root-one"))()).To(BeFalse())
	inst, _ = getInst(ns, "root")()
	g.Expect(inst.Status.InstallationReferences).To(HaveLen(1))
	// The orphan ran its deletion flow with the parent's job, marked
	// delete-ignore-successors.
	g.Expect(rec.index(func(i *lsv1alpha1.Installation) bool {
		return i.Name == "root-two" && i.Status.Phase == lsv1alpha1.PhaseDeleting && i.Status.JobID == inst.Status.JobID &&
			i.Annotations[lsv1alpha1.DeleteIgnoreSuccessorsAnnotation] == "true"
	})).To(BeNumerically(">=", 0))
}

// A predecessor that failed fails its successor; the parent fails.
func TestFailedPredecessorFailsSuccessor(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	fs := treeFS()
	fs["a/blueprint.yaml"] = `exports:
- name: endpoint
  type: data
deployExecutions:
- name: deploy
  type: GoTemplate
  template: |
    deployItems:
    - name: server
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        phase: Failed
`
	root := newInstallation(ns, "root", fs, reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	create(g, root)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed), HaveField("Status.LastError.Reason", "SubObjectsFailed")))
	a, _ := getInst(ns, "root-a")()
	g.Expect(a.Status.LastError.Reason).To(Equal("SubObjectsFailed"))
	b, _ := getInst(ns, "root-b")()
	g.Expect(b.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
	g.Expect(b.Status.JobIDFinished).To(Equal(a.Status.JobID))
	g.Expect(b.Status.LastError.Reason).To(Equal("PredecessorFailed"))
}

// An execution the blueprint no longer renders is deleted like an orphaned
// sub-installation.
func TestOrphanedExecutionIsDeleted(t *testing.T) {
	ns, g := setup(t)
	enabled := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "enabled"), Data: lsv1alpha1.NewAnyJSON([]byte(`true`))}
	create(g, enabled)
	fs := map[string]string{"blueprint.yaml": `imports:
- name: enabled
  type: data
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    {{- if .imports.enabled }}
` + indent(mockItem("item", ""), 4) + `
    {{- end }}
`}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "enabled", DataRef: "enabled"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	_, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())

	enabled.Data = lsv1alpha1.NewAnyJSON([]byte(`false`))
	g.Expect(env.Client.Update(context.Background(), enabled)).To(Succeed())
	inst, _ = getInst(ns, "root")()
	first := inst.Status.JobID
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobID", Not(Equal(first))), HaveField("Status.ExecutionReference", BeNil())))
	_, err = getExec(ns, "root")()
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

// Orphaned sub-installations whose deletion fails end DeleteFailed; when
// all of them did, the parent's job fails in CleanupOrphaned with
// OrphanDeletionFailed. Their deploy items use a Target that is deleted
// before they become orphans, so the items' uninstall fails (as in
// TestDeleteFailedAndRetry). With the Target back, a new job deletes them.
func TestOrphansDeleteFailedFailParent(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	ctx := context.Background()
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	names := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "names"), Data: lsv1alpha1.NewAnyJSON([]byte(`["one","two"]`))}
	create(g, names)
	fs := map[string]string{
		"blueprint.yaml": subPerNameBlueprint,
		"sub/blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      target:
        name: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          apiVersion: example.org/v1
          kind: Installed
`,
	}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "names", DataRef: "names"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	// The Target goes; then both sub-installations leave the blueprint.
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster")})).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, &lsv1alpha1.Target{})
		return apierrors.IsNotFound(err)
	}, timeout, interval).Should(BeTrue())
	names.Data = lsv1alpha1.NewAnyJSON([]byte(`[]`))
	g.Expect(env.Client.Update(ctx, names)).To(Succeed())
	inst, _ = getInst(ns, "root")()
	first := inst.Status.JobID
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.JobID", Not(Equal(first))),
		HaveField("Status.LastError.Reason", "OrphanDeletionFailed"),
		HaveField("Status.LastError.Operation", string(lsv1alpha1.PhaseCleanupOrphaned))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	inst, _ = getInst(ns, "root")()
	job := inst.Status.JobID
	// The message names the orphans and quotes the cause (the first
	// orphan's, from the bottom of its tree, read from the orphans the job
	// has) as SubObjectsDeleteFailed does, with the way on, not only their
	// names.
	msg := inst.Status.LastError.Message
	g.Expect(msg).To(HavePrefix("deleting orphans failed: sub-installation root-one (DeleteFailed), sub-installation root-two (DeleteFailed); " +
		"cause: sub-installation root-one → execution root-one: DeleteFailed: deleting deploy items failed: item; item: TargetNotFound: spec.target: Target " + ns + "/cluster not found; "))
	g.Expect(msg).To(HaveSuffix(`to delete it without uninstalling; fix the cause first (e.g. create the missing Target again, or annotate the deploy item with ` +
		lsv1alpha1.DeleteWithoutUninstallAnnotation + `: "true" as the cause says), then add the reconcile annotation to the root installation to retry`))
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady),
		HaveField("Status", BeEquivalentTo("False")), HaveField("Reason", "OrphanDeletionFailed"), HaveField("Message", msg))))
	for _, n := range []string{"root-one", "root-two"} {
		sub, err := getInst(ns, n)()
		g.Expect(err).NotTo(HaveOccurred(), n)
		g.Expect(sub.DeletionTimestamp).NotTo(BeNil(), n)
		g.Expect(sub.Status.Phase).To(Equal(lsv1alpha1.PhaseDeleteFailed), n)
		g.Expect(sub.Status.JobIDFinished).To(Equal(job), n)
	}
	// The failed job went (Init →) CleanupOrphaned → Failed: the orphans'
	// failure ended it before any sub-object got the job (its start shares
	// the status write of CleanupOrphaned, the first phase that waits).
	phases := rec.phases("root")
	g.Expect(phases[len(phases)-3:]).To(HaveExactElements(lsv1alpha1.PhaseSucceeded, lsv1alpha1.PhaseCleanupOrphaned, lsv1alpha1.PhaseFailed))

	// With the Target back, a new job hands itself to the orphans again,
	// whose deletion now succeeds.
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(job)))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	for _, n := range []string{"root-one", "root-two"} {
		g.Expect(gone(getInst(ns, n))()).To(BeTrue(), n)
	}
}

// subPerNameBlueprint has one sub-installation (blueprint directory sub) per
// entry of the data import names: changing the import orphans the others.
const subPerNameBlueprint = `imports:
- name: names
  type: data
  schema: {type: array, items: {type: string}}
subinstallationExecutions:
- name: subs
  type: GoTemplate
  template: |
    subinstallations:
    {{- range .imports.names }}
    - name: {{ . }}
      blueprint:
        dir: sub
    {{- end }}
`

// A root deleted without running its deletion job (its finalizer removed by
// hand, or deleted before its first job added it) leaves children that no
// parent will ever hand a deletion job. The garbage collector deletes them
// (envtest has none, so the test does); each then deletes itself as a root
// would - sub-installations and their executions - and no finalizer is left
// behind.
func TestChildrenOfARootDeletedWithoutItsFinalizerDeleteThemselves(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rootWithSubsAndExecution(g, ns, `["one"]`)

	root, err := getInst(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Patch(ctx, root, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root"))).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	// What the garbage collector does with the root's dependents.
	for _, child := range []client.Object{&lsv1alpha1.Installation{}, &lsv1alpha1.Execution{}} {
		g.Expect(env.Client.DeleteAllOf(ctx, child, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.EncompassedByLabel: "root"})).To(Succeed())
	}
	g.Eventually(func(g Gomega) []string {
		var left []string
		insts, execs := &lsv1alpha1.InstallationList{}, &lsv1alpha1.ExecutionList{}
		for _, l := range []client.ObjectList{insts, execs} {
			g.Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		}
		for _, o := range insts.Items {
			left = append(left, "Installation/"+o.Name+" "+string(o.Status.Phase))
		}
		for _, o := range execs.Items {
			left = append(left, "Execution/"+o.Name+" "+string(o.Status.Phase))
		}
		return left
	}).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
}

// rootWithSubsAndExecution creates root installation "root" with one
// sub-installation per name in the JSON list names ("root-<name>", each with
// an execution of its own) and an execution of its own, and waits until its
// first job succeeded.
func rootWithSubsAndExecution(g Gomega, ns, names string) {
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "names"), Data: lsv1alpha1.NewAnyJSON([]byte(names))})
	fs := map[string]string{
		"blueprint.yaml":     subPerNameBlueprint + simpleBlueprint("")["blueprint.yaml"],
		"sub/blueprint.yaml": simpleBlueprint("")["blueprint.yaml"],
	}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "names", DataRef: "names"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
}

// Sub-installations that leave the blueprint uninstall with the Target their
// parent handed down: the parent's context copy of it (root.cluster, which
// their deploy items name) must outlast their deletion, although the parent,
// now without sub-installations, does not write it any more. Deleted in
// Init as stale, before CleanupOrphaned hands the orphans their deletion,
// it would leave their items DeleteFailed (TargetNotFound) and the parent
// OrphanDeletionFailed in every job.
func TestOrphansUninstallWithTheTargetTheParentHandedDown(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	names := &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "names"), Data: lsv1alpha1.NewAnyJSON([]byte(`["one"]`))}
	create(g, names)
	fs := map[string]string{
		"blueprint.yaml": `imports:
- name: names
  type: data
- name: cluster
  type: target
subinstallationExecutions:
- name: subs
  type: GoTemplate
  template: |
    subinstallations:
    {{- range .imports.names }}
    - name: {{ . }}
      blueprint:
        dir: sub
      imports:
        targets:
        - name: cluster
          target: cluster
    {{- end }}
`,
		"sub/blueprint.yaml": `imports:
- name: cluster
  type: target
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      target:
        import: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          apiVersion: example.org/v1
          kind: Installed
`,
	}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "names", DataRef: "names"}}
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "cluster", Target: "cluster"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: installation.ScopedName("root", "cluster")}, &lsv1alpha1.Target{})).To(Succeed(), "the context copy the sub-installation imports")

	names.Data = lsv1alpha1.NewAnyJSON([]byte(`[]`))
	g.Expect(env.Client.Update(ctx, names)).To(Succeed())
	inst, _ = getInst(ns, "root")()
	first := inst.Status.JobID
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	g.Expect(gone(getInst(ns, "root-one"))()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.Target{}, installation.ScopedName("root", "cluster"))()).To(BeFalse(), "stale once the orphan is gone: deleted in Completing")
}

// A sub-installation that stays but is re-templated without the target
// import its parent no longer has: its deploy items of the last job name the
// parent's Target copy and need it to uninstall, after the parent's Init.
// The copy is kept until the job completes: deleted in Init as stale, the
// old item's deletion would fail (TargetNotFound), the sub-installation
// OrphanDeletionFailed and the parent SubObjectsFailed in every job, as
// nothing writes the copy again.
func TestStayingSubInstallationUninstallsWithTheTargetTheParentDropped(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: "test/any"}})
	withTarget := map[string]string{
		"blueprint.yaml": `imports:
- name: cluster
  type: target
subinstallations:
- name: one
  blueprint: {dir: sub}
  imports:
    targets:
    - name: cluster
      target: cluster
`,
		"sub/blueprint.yaml": `imports:
- name: cluster
  type: target
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      target:
        import: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          apiVersion: example.org/v1
          kind: Installed
`,
	}
	inst := newInstallation(ns, "root", withTarget, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "cluster", Target: "cluster"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	copyName := installation.ScopedName("root", "cluster")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, copyName)()).To(BeTrue(), "the context copy the sub-installation's item names")
	g.Expect(exists(ns, &lsv1alpha1.Execution{}, "root-one")()).To(BeTrue(), "the sub-installation's execution, whose item names the copy")

	rerun(g, ns, "root", func(i *lsv1alpha1.Installation) {
		i.Spec.Imports.Targets = nil
		i.Spec.Blueprint.Inline.Filesystem = map[string]string{
			"blueprint.yaml":     "subinstallations:\n- name: one\n  blueprint: {dir: sub}\n",
			"sub/blueprint.yaml": "imports: []\n",
		}
	})
	g.Expect(gone(getInst(ns, "root-one"))()).To(BeFalse(), "one stays")
	g.Expect(exists(ns, &lsv1alpha1.Execution{}, "root-one")()).To(BeFalse(), "uninstalled with the Target copy")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, copyName)()).To(BeFalse(), "stale once nothing names it: deleted in Completing")
	// And the next job too.
	rerun(g, ns, "root", func(*lsv1alpha1.Installation) {})
}
