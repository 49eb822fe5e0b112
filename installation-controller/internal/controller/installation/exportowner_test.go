package installation_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// exportingBlueprint exports data "out" (value v) and target "cl".
func exportingBlueprint(v string) map[string]string {
	return map[string]string{"blueprint.yaml": `exports:
- name: out
  type: data
- name: cl
  type: target
exportExecutions:
- name: e
  type: GoTemplate
  template: |
    exports:
      out: ` + v + `
      cl:
        type: landscaper.gardener.cloud/kubernetes-cluster
        config: {kubeconfig: ` + v + `}
`}
}

func warningEvents(ctx context.Context, ns, reason string) func() ([]string, error) {
	return eventsOfType(ctx, ns, reason, corev1.EventTypeWarning)
}

// eventsOfType lists the names of the objects with an Event of type typ
// and reason in ns.
func eventsOfType(ctx context.Context, ns, reason, typ string) func() ([]string, error) {
	return func() ([]string, error) {
		evs := &corev1.EventList{}
		err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": reason})
		var objs []string
		for _, e := range evs.Items {
			if e.Type == typ {
				objs = append(objs, e.InvolvedObject.Name)
			}
		}
		return objs, err
	}
}

// An export naming a DataObject or Target someone else created fails the
// job and leaves the object as it was: no new content, no owner reference
// (which would hand it to garbage collection with the installation).
func TestExportNeverOverwritesForeignObjects(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "shared"), Data: lsv1alpha1.NewAnyJSON([]byte(`"mine"`))})
	realConfig := lsv1alpha1.NewAnyJSON([]byte(`{"kubeconfig":"real"}`))
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "prod"), Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &realConfig}})

	data := newInstallation(ns, "data", exportingBlueprint("attacker"), reconcileAnnotation...)
	data.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "shared"}}
	create(g, data)
	target := newInstallation(ns, "target", exportingBlueprint("attacker"), reconcileAnnotation...)
	target.Spec.Exports.Targets = []lsv1alpha1.TargetExport{{Name: "cl", Target: "prod"}}
	create(g, target)

	failsWith(g, ns, "data", "ExportConflict", `export "out" (dataRef "shared")`, "DataObject "+ns+"/shared exists and was not created by Terrace")
	failsWith(g, ns, "target", "ExportConflict", `target export "cl" (target "prod")`, "Target "+ns+"/prod exists and was not created by Terrace")
	g.Eventually(warningEvents(ctx, ns, "ExportConflict"), timeout, interval).Should(ContainElements("data", "target"))

	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"mine"`))
	g.Expect(do.OwnerReferences).To(BeEmpty())
	tg := &lsv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod"}, tg)).To(Succeed())
	g.Expect(tg.Spec.Config.RawMessage).To(MatchJSON(`{"kubeconfig":"real"}`))
	g.Expect(tg.OwnerReferences).To(BeEmpty())
}

// An export name another installation still exports is that
// installation's: a second root exporting it fails and the object keeps its
// one controller, content and owner.
func TestExportHeldByAnotherInstallationConflicts(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	first := newInstallation(ns, "first", exportingBlueprint("one"), reconcileAnnotation...)
	first.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "shared"}}
	create(g, first)
	g.Eventually(getInst(ns, "first"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "first")(); return lastError(i) })
	first, _ = getInst(ns, "first")()

	second := newInstallation(ns, "second", exportingBlueprint("two"), reconcileAnnotation...)
	second.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "shared"}}
	create(g, second)
	failsWith(g, ns, "second", "ExportConflict", `export "out" (dataRef "shared")`, "DataObject "+ns+"/shared exists and belongs to Installation first")
	g.Eventually(warningEvents(ctx, ns, "ExportConflict"), timeout, interval).Should(ContainElement("second"))

	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"one"`))
	g.Expect(do.OwnerReferences).To(HaveExactElements(And(HaveField("UID", first.UID), HaveField("Controller", HaveValue(BeTrue())))))
}

// An export moved from one sibling to another in a spec change moves its
// object: the new writer takes over an object whose writer no longer
// exports its name (whether or not that writer has completed its job and
// deleted it yet), never as a second owner. Here the old writer, a, waits
// for b (it imports b's other export), so b meets a's object of the old spec
// and takes it over; before, it failed ExportConflict in every job, since a
// never got to complete.
func TestExportMovesBetweenSiblings(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	parent := func(aRef, bExtra string) map[string]string {
		childA := "imports:\n- name: dep\n  type: data\nexports:\n- name: out\n  type: data\nexportExecutions:\n- name: e\n  type: GoTemplate\n  template: |\n    exports:\n      out: from-a\n"
		childB := "exports:\n- name: out\n  type: data\n- name: extra\n  type: data\nexportExecutions:\n- name: e\n  type: GoTemplate\n  template: |\n    exports:\n      out: b\n      extra: from-b\n"
		return map[string]string{"blueprint.yaml": `subinstallations:
- name: a
  blueprint: {dir: a}
  imports: {data: [{name: dep, dataRef: bval}]}
  exports: {data: [{name: out, dataRef: ` + aRef + `}]}
- name: b
  blueprint: {dir: b}
  exports: {data: [{name: out, dataRef: bval}` + bExtra + `]}
`, "a/blueprint.yaml": childA, "b/blueprint.yaml": childB}
	}
	create(g, newInstallation(ns, "root", parent("shared", ""), reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	a, _ := getInst(ns, "root-a")()
	b, _ := getInst(ns, "root-b")()
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root.shared"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"from-a"`))

	rerun(g, ns, "root", func(i *lsv1alpha1.Installation) {
		i.Spec.Blueprint.Inline.Filesystem = parent("other", ", {name: extra, dataRef: shared}")
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root.shared"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"from-b"`))
	g.Expect(do.OwnerReferences).To(HaveExactElements(And(HaveField("UID", b.UID), HaveField("Controller", HaveValue(BeTrue())))))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root.other"}, do)).To(Succeed())
	g.Expect(do.OwnerReferences).To(HaveExactElements(HaveField("UID", a.UID)))
}

// An installation's own exports are its to update: the next job writes the
// new values. Exports written before exports had a controller owner (a
// plain owner reference to the installation) are taken over as its own.
func TestOwnExportsAreUpdated(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	inst := newInstallation(ns, "p", exportingBlueprint("one"))
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	inst.Spec.Exports.Targets = []lsv1alpha1.TargetExport{{Name: "cl", Target: "p-cl"}}
	create(g, inst)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(HaveField("Finalizers", ContainElement(lsv1alpha1.Finalizer)))
	inst, _ = getInst(ns, "p")()
	legacy := metav1.OwnerReference{APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "Installation", Name: "p", UID: inst.UID}
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-out", OwnerReferences: []metav1.OwnerReference{legacy}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))})
	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })

	ownedByP := HaveExactElements(And(HaveField("UID", inst.UID), HaveField("Controller", HaveValue(BeTrue()))))
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-out"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"one"`))
	g.Expect(do.OwnerReferences).To(ownedByP)

	inst, _ = getInst(ns, "p")()
	first := inst.Status.JobID
	inst.Spec.Blueprint.Inline.Filesystem = exportingBlueprint("two")
	inst.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-out"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"two"`))
	g.Expect(do.OwnerReferences).To(ownedByP)
	tg := &lsv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-cl"}, tg)).To(Succeed())
	g.Expect(tg.Spec.Config.RawMessage).To(MatchJSON(`{"kubeconfig":"two"}`))
	g.Expect(tg.OwnerReferences).To(ownedByP)
}

// An export name the API server refuses never becomes valid: the job
// fails at once instead of retrying for ever.
func TestInvalidExportNameFails(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	inst := newInstallation(ns, "p", exportingBlueprint("one"), reconcileAnnotation...)
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "Bad_Name"}}
	create(g, inst)
	failed := failsWith(g, ns, "p", "ExportInvalid", `export "out" (dataRef "Bad_Name")`, `"Bad_Name" is not a valid DataObject name`)
	g.Expect(failed.Status.LastError.Codes).To(ContainElement(lsv1alpha1.ErrorConfigurationProblem))
	// Still deletable.
	g.Expect(env.Client.Delete(ctx, failed)).To(Succeed())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())
}

// An export whose object belongs to an installation that is gone waits for
// garbage collection (envtest runs none: the test deletes it) instead of
// failing, saying so in its Ready condition, and then writes the object as
// its own (woken by the deletion: see also
// TestExportNameWaitIsNoErrorAndTheDeletionWakesTheJob).
func TestExportWaitsForObjectOfGoneOwner(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-out", OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))})
	inst := newInstallation(ns, "p", exportingBlueprint("new"), reconcileAnnotation...)
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	create(g, inst)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(And(waitsForName(lsv1alpha1.PhaseCompleting, "DataObject", ns, "p-out"),
		HaveField("Status.Conditions", ContainElement(HaveField("Message", ContainSubstring("it belongs to installation old, which is gone"))))),
		func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	i, _ := getInst(ns, "p")()

	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "p-out")})).To(Succeed())
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-out"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"new"`))
	g.Expect(do.OwnerReferences).To(HaveExactElements(HaveField("UID", i.UID)))
}

func ptrTo[T any](v T) *T { return &v }

// An installation being deleted writes no export nor context copy: its
// running job is finished first (seed 002), but what it would write now
// outlives the deletion, say an object that went meanwhile, created again.
// The job ends Failed (DeletedDuringJob) instead, saying so, and the
// deletion job follows. p waits in Init for the name of its context copy
// p.x, exp in Completing for its Target export's (each held by an object
// being deleted), when both are deleted; the held names are freed then, so
// the jobs would go on to write them. Completing does not fail SpecChanged
// (setting the deletion timestamp moves the generation), which would advise
// the reconcile annotation, useless for an installation being deleted; Init
// ends before it writes anything, p.x included (see
// TestInitOfAnInstallationBeingDeletedCreatesNothing).
func TestInstallationBeingDeletedWritesNoExport(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)
	heldTarget := &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "exp-cl"), Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType}}
	createGoing(g, heldTarget)
	exp := newInstallation(ns, "exp", exportingBlueprint("new"), reconcileAnnotation...)
	exp.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "exp-out"}}
	exp.Spec.Exports.Targets = []lsv1alpha1.TargetExport{{Name: "cl", Target: "exp-cl"}}
	create(g, exp)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`"from-p"`))})
	heldCopy := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p.x", OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	createGoing(g, heldCopy)
	p := newInstallation(ns, "p", nil, reconcileAnnotation...)
	movingValueSpec(p, true, false)
	create(g, p)
	g.Eventually(getInst(ns, "exp"), timeout, interval).Should(waitsForName(lsv1alpha1.PhaseCompleting, "Target", ns, "exp-cl"),
		func() string { i, _ := getInst(ns, "exp")(); return lastError(i) })
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(waitsForName(lsv1alpha1.PhaseInit, "DataObject", ns, "p.x"),
		func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	// exp's data export is written (before the Target export waits): it
	// goes too, and must not come back.
	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "exp-out")})).To(Succeed())
	writes := watchWrites(t, ns)
	owners := map[k8stypes.UID]bool{}
	for _, name := range []string{"exp", "p"} {
		inst, _ := getInst(ns, name)()
		owners[inst.UID] = true
		g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	}
	releaseHeld(g, heldTarget)
	releaseHeld(g, heldCopy)

	g.Eventually(gone(getInst(ns, "exp")), timeout, interval).Should(BeTrue())
	g.Eventually(gone(getInst(ns, "p")), timeout, interval).Should(BeTrue())
	// The deletion job deletes p's context (p.x with it): the watch says
	// whether it was written meanwhile; a DataObject written last marks
	// the end of what it has to show.
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "last"), Data: lsv1alpha1.NewAnyJSON([]byte(`1`))})
	g.Eventually(func() []string { return writes.names(nil) }, timeout, interval).Should(ContainElement("last"))
	g.Expect(writes.names(owners)).To(BeEmpty(), "no DataObject is written by an installation being deleted")
	for name, obj := range map[string]client.Object{"exp-out": &lsv1alpha1.DataObject{}, "exp-cl": &lsv1alpha1.Target{}, "p.x": &lsv1alpha1.DataObject{}} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s is not written while its installation is being deleted (err: %v)", name, err)
	}
	messages := map[string]string{
		"exp": `the installation is being deleted: export "out" (dataRef "exp-out") and target export "cl" (target "exp-cl") are not written; the job ends here and the deletion job follows`,
		"p":   `the installation is being deleted: its execution, sub-installations and context copies are not written; the job ends in phase Init and the deletion job follows`,
	}
	for name, msg := range messages {
		g.Expect(rec.index(func(i *lsv1alpha1.Installation) bool {
			return i.Name == name && i.Status.Phase == lsv1alpha1.PhaseFailed && i.Status.LastError != nil &&
				i.Status.LastError.Reason == "DeletedDuringJob" && i.Status.LastError.Message == msg
		})).NotTo(Equal(-1), "%s's install job ended Failed saying why, before its deletion job started", name)
	}
}

// An installation deleted while its Init waits (here for a predecessor)
// creates nothing when Init runs again: the job ends Failed
// (DeletedDuringJob) before any request, and the deletion job follows:
// whatever it created, the deletion job would delete again (uninstalling
// deploy items just installed).
func TestInitOfAnInstallationBeingDeletedCreatesNothing(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	rec := record(t, ns)
	// pred waits in Completing for the name of its export, held by an
	// object being deleted, until the test releases it.
	held := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pred-out", OwnerReferences: []metav1.OwnerReference{goneOwner}},
		Data: lsv1alpha1.NewAnyJSON([]byte(`"old"`))}
	createGoing(g, held)
	pred := newInstallation(ns, "pred", exportingBlueprint("new"), reconcileAnnotation...)
	pred.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "pred-out"}}
	create(g, pred)
	g.Eventually(getInst(ns, "pred"), timeout, interval).Should(waitsForName(lsv1alpha1.PhaseCompleting, "DataObject", ns, "pred-out"),
		func() string { i, _ := getInst(ns, "pred")(); return lastError(i) })
	// dep imports pred's export: it waits in Init for pred. Its blueprint
	// renders a deploy item and a sub-installation reading the import.
	dep := newInstallation(ns, "dep", map[string]string{
		"blueprint.yaml": `imports:
- name: x
  type: data
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + indent(mockItem("item", ""), 4) + `
subinstallations:
- name: s
  blueprint: {dir: s}
  imports: {data: [{name: v, dataRef: x}]}
`,
		"s/blueprint.yaml": "imports:\n- name: v\n  type: data\n",
	}, reconcileAnnotation...)
	dep.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "x", DataRef: "pred-out"}}
	create(g, dep)
	g.Eventually(getInst(ns, "dep"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInit),
		HaveField("Status.Conditions", ContainElement(And(HaveField("Reason", "Waiting"), HaveField("Message", ContainSubstring("predecessors pred to finish")))))))

	dep, _ = getInst(ns, "dep")()
	g.Expect(env.Client.Delete(ctx, dep)).To(Succeed())
	releaseHeld(g, held)
	g.Eventually(getInst(ns, "pred"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "pred")(); return lastError(i) })
	g.Eventually(gone(getInst(ns, "dep")), timeout, interval).Should(BeTrue())

	// The recorder has seen dep's install job end once it shows it: any
	// sub-installation the job created comes before in the watch.
	failed := func(i *lsv1alpha1.Installation) bool {
		return i.Name == "dep" && i.Status.Phase == lsv1alpha1.PhaseFailed && i.Status.LastError != nil && i.Status.LastError.Reason == "DeletedDuringJob"
	}
	g.Eventually(func() int { return rec.index(failed) }, timeout, interval).ShouldNot(Equal(-1))
	end := rec.statuses("dep")[0]
	for _, st := range rec.statuses("dep") {
		if failed(&st) {
			end = st
			break
		}
	}
	g.Expect(rec.statuses("dep-s")).To(BeEmpty(), "no sub-installation created")
	g.Expect(end.Status.ExecutionReference).To(BeNil(), "no execution created")
	g.Expect(end.Status.InstallationReferences).To(BeEmpty(), "no sub-installation created")
	g.Expect(end.Status.LastError.Message).To(Equal("the installation is being deleted: its execution, sub-installations and context copies are not written; " +
		"the job ends in phase Init and the deletion job follows"))
	g.Expect(end.Status.LastError.Operation).To(Equal(string(lsv1alpha1.PhaseInit)))
}

// dataObjectWrites records the DataObjects a watch saw created or changed,
// in the API server's order.
type dataObjectWrites struct {
	mu   sync.Mutex
	seen []lsv1alpha1.DataObject
}

// watchWrites watches the DataObjects of namespace ns from now on (the
// objects that exist already are reported first, as the watch starts).
func watchWrites(t *testing.T, ns string) *dataObjectWrites {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &lsv1alpha1.DataObjectList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	d := &dataObjectWrites{}
	go func() {
		for ev := range w.ResultChan() {
			if do, ok := ev.Object.(*lsv1alpha1.DataObject); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				d.mu.Lock()
				d.seen = append(d.seen, *do)
				d.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return d
}

// names are the DataObjects written (created or changed) with an owner
// among owners (nil: all), their deletion aside.
func (d *dataObjectWrites) names(owners map[k8stypes.UID]bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for i := range d.seen {
		do := &d.seen[i]
		if do.DeletionTimestamp != nil {
			continue
		}
		if owners == nil {
			out = append(out, do.Name)
			continue
		}
		for _, ref := range do.OwnerReferences {
			if owners[ref.UID] {
				out = append(out, do.Name)
			}
		}
	}
	return out
}
