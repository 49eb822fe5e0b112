package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// exists says whether the DataObject or Target named name is there.
func exists(ns string, obj client.Object, name string) func() (bool, error) {
	return func() (bool, error) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
}

// rerun changes the installation's spec with mutate, adds the reconcile
// annotation and waits for the new job to succeed.
func rerun(g Gomega, ns, name string, mutate func(*lsv1alpha1.Installation)) {
	inst, err := getInst(ns, name)()
	g.Expect(err).NotTo(HaveOccurred())
	first := inst.Status.JobID
	mutate(inst)
	inst.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(context.Background(), inst)).To(Succeed())
	g.Eventually(getInst(ns, name), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(first)))),
		func() string { i, _ := getInst(ns, name)(); return lastError(i) })
}

// An export renamed in the spec does not leave the object of the old name
// behind for importers to read as current: the job that writes the new name
// deletes the old DataObject. An exported Target of the old name stays (a
// deploy item of an importer may name it and need it to uninstall). Objects
// the installation does not control are never touched.
func TestRenamedExportIsDeleted(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "users"), Data: lsv1alpha1.NewAnyJSON([]byte(`"mine"`))})
	inst := newInstallation(ns, "p", exportingBlueprint("one"), reconcileAnnotation...)
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p-out"}}
	inst.Spec.Exports.Targets = []lsv1alpha1.TargetExport{{Name: "cl", Target: "p-cl"}}
	create(g, inst)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p-out")()).To(BeTrue())

	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) {
		i.Spec.Exports.Data[0].DataRef = "p-renamed"
		i.Spec.Exports.Targets[0].Target = "p-cl-renamed"
	})
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p-out")()).To(BeFalse(), "the old export is deleted by the job that renamed it")
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p-renamed")()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p-cl")()).To(BeTrue(), "exported Targets stay")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p-cl-renamed")()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "users")()).To(BeTrue(), "not the installation's")
	g.Eventually(eventsOfType(ctx, ns, installation.ReasonStaleObjectDeleted, corev1.EventTypeNormal), timeout, interval).Should(ContainElement("p"))

	// Dropping the export entirely deletes it too.
	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) { i.Spec.Exports.Data = nil })
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p-renamed")()).To(BeFalse())
}

// contextBlueprint: a parent importing data g and target t (names given)
// and, with sub, one sub-installation importing both from the parent's
// context.
func contextBlueprint(g, t string, sub bool) map[string]string {
	bp := "imports:\n- name: " + g + "\n  type: data\n- name: " + t + "\n  type: target\n"
	if sub {
		bp += `subinstallations:
- name: s
  blueprint: {dir: child}
  imports:
    data: [{name: v, dataRef: ` + g + `}]
    targets: [{name: cl, target: ` + t + `}]
`
	}
	return map[string]string{"blueprint.yaml": bp, "child/blueprint.yaml": "imports:\n- name: v\n  type: data\n- name: cl\n  type: target\n"}
}

func contextImports(i *lsv1alpha1.Installation, g, t string) {
	i.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: g, DataRef: "in"}}
	i.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: t, Target: "cluster"}}
}

// withContextCopies runs root p (contextBlueprint "g", "t", with its
// sub-installation p-s) to Succeeded: its context holds the copies p.g
// (DataObject) and p.t (Target) of DataObject "in" and Target "cluster".
func withContextCopies(g Gomega, ns string) {
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hi"`))})
	cfg := lsv1alpha1.NewAnyJSON([]byte(`{"kubeconfig":"x"}`))
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "cluster"), Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &cfg}})
	p := newInstallation(ns, "p", contextBlueprint("g", "t", true), reconcileAnnotation...)
	contextImports(p, "g", "t")
	create(g, p)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p.g")()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p.t")()).To(BeTrue())
	g.Expect(getInst(ns, "p-s")()).Error().NotTo(HaveOccurred(), "the sub-installation")
}

// A context copy is not an export its writer stopped exporting: another
// installation exporting under its object name conflicts instead of taking
// it over (which would feed p's sub-installation someone else's value).
func TestContextCopyIsNeverTakenOver(t *testing.T) {
	ns, g := setup(t)
	withContextCopies(g, ns)
	thief := newInstallation(ns, "thief", exportingBlueprint("stolen"), reconcileAnnotation...)
	thief.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "out", DataRef: "p.g"}}
	create(g, thief)
	failsWith(g, ns, "thief", "ExportConflict", "DataObject "+ns+"/p.g exists and belongs to Installation p")
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p.g"}, do)).To(Succeed())
	g.Expect(string(do.Data.RawMessage)).To(Equal(`"hi"`))
}

// Context copies of imports that the parent no longer has (renamed), or
// that no sub-installation needs any more, are deleted when the job that
// stopped writing them completes: a sub-installation must not read a copy
// nobody updates.
func TestStaleContextCopiesAreDeleted(t *testing.T) {
	ns, g := setup(t)
	withContextCopies(g, ns)

	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) {
		i.Spec.Blueprint.Inline.Filesystem = contextBlueprint("g2", "t2", true)
		contextImports(i, "g2", "t2")
	})
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p.g2")()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p.t2")()).To(BeTrue())
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p.g")()).To(BeFalse(), "renamed import: the old copy goes")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p.t")()).To(BeFalse(), "renamed target import: the old copy goes")

	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) {
		i.Spec.Blueprint.Inline.Filesystem = contextBlueprint("g2", "t2", false)
	})
	g.Expect(gone(getInst(ns, "p-s"))()).To(BeTrue(), "the sub-installation is an orphan, deleted in the job")
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "p.g2")()).To(BeFalse(), "no sub-installation left: no copies")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "p.t2")()).To(BeFalse())
	g.Expect(exists(ns, &lsv1alpha1.DataObject{}, "in")()).To(BeTrue(), "the imported objects themselves are not the installation's")
	g.Expect(exists(ns, &lsv1alpha1.Target{}, "cluster")()).To(BeTrue())
}
