package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// movingValueBlueprint: root p with sub-installations a and b; b imports
// value x from p's context (dataRef x). With parentImports, p imports x and
// passes it down (its context copy p.x); with aExports, a exports x
// (dataRef x, the same object p.x) and p does not import it.
func movingValueBlueprint(parentImports, aExports bool) map[string]string {
	bp := ""
	if parentImports {
		bp += "imports:\n- name: x\n  type: data\n"
	}
	bp += "subinstallations:\n- name: a\n  blueprint: {dir: a}\n"
	childA := "imports: []\n"
	if aExports {
		bp += "  exports: {data: [{name: x, dataRef: x}]}\n"
		childA = "exports:\n- name: x\n  type: data\nexportExecutions:\n- name: e\n  type: GoTemplate\n  template: |\n    exports:\n      x: from-a\n"
	}
	bp += "- name: b\n  blueprint: {dir: b}\n  imports: {data: [{name: v, dataRef: x}]}\n"
	return map[string]string{"blueprint.yaml": bp, "a/blueprint.yaml": childA, "b/blueprint.yaml": "imports:\n- name: v\n  type: data\n"}
}

func movingValueSpec(i *lsv1alpha1.Installation, parentImports, aExports bool) {
	i.Spec.Blueprint.Inline.Filesystem = movingValueBlueprint(parentImports, aExports)
	i.Spec.Imports.Data = nil
	if parentImports {
		i.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "x", DataRef: "in"}}
	}
}

// controlledBy says who controls DataObject name and what it holds.
func controlledBy(g Gomega, ns, name string) (string, string) {
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, do)).To(Succeed())
	var owner string
	for _, ref := range do.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			owner = ref.Name
		}
	}
	return owner, string(do.Data.RawMessage)
}

// A value that moves from the parent's imports to a sub-installation's
// exports: the parent's stale context copy p.x goes in its Init, before the
// sub-installations get the job, so a writes its export x as its own (were
// stale copies deleted only by a completed job, a would fail ExportConflict
// "... belongs to Installation p" in every job, and the parent, failing,
// would never complete).
func TestImportThatBecomesAChildsExportMoves(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`"from-p"`))})
	p := newInstallation(ns, "p", nil, reconcileAnnotation...)
	movingValueSpec(p, true, false)
	create(g, p)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	owner, value := controlledBy(g, ns, "p.x")
	g.Expect(owner).To(Equal("p"))
	g.Expect(value).To(Equal(`"from-p"`))

	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) { movingValueSpec(i, false, true) })
	owner, value = controlledBy(g, ns, "p.x")
	g.Expect(owner).To(Equal("p-a"), "a's export now")
	g.Expect(value).To(Equal(`"from-a"`))
	// And the next job too (no failure left behind to lock it).
	rerun(g, ns, "p", func(*lsv1alpha1.Installation) {})
}

// A value that moves from a sub-installation's exports to the parent's
// imports: the parent re-templates a (which no longer exports x) before it
// writes its context copy, and takes a's old export p.x over (else Init
// would fail ExportConflict "... belongs to Installation p-a" for ever).
func TestChildsExportThatBecomesAnImportMoves(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "in"), Data: lsv1alpha1.NewAnyJSON([]byte(`"from-p"`))})
	p := newInstallation(ns, "p", nil, reconcileAnnotation...)
	movingValueSpec(p, false, true)
	create(g, p)
	g.Eventually(getInst(ns, "p"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "p")(); return lastError(i) })
	owner, value := controlledBy(g, ns, "p.x")
	g.Expect(owner).To(Equal("p-a"))
	g.Expect(value).To(Equal(`"from-a"`))

	rerun(g, ns, "p", func(i *lsv1alpha1.Installation) { movingValueSpec(i, true, false) })
	owner, value = controlledBy(g, ns, "p.x")
	g.Expect(owner).To(Equal("p"), "p's context copy now")
	g.Expect(value).To(Equal(`"from-p"`))
	rerun(g, ns, "p", func(*lsv1alpha1.Installation) {})
}

// A sub-installation import that nothing in the parent's context provides
// (no import of the parent, no sibling's export) fails the parent's job
// TemplateFailed, naming it, before anything is created, whatever the
// timing (not a stale copy read, ImportsChanged, or ImportNotFound).
func TestSubInstallationImportNothingProvidesFails(t *testing.T) {
	ns, g := setup(t)
	p := newInstallation(ns, "p", movingValueBlueprint(false, false), reconcileAnnotation...)
	create(g, p)
	failsWith(g, ns, "p", "TemplateFailed", `subinstallation "b" imports data "x", which nothing in the context of its parent provides`)
	g.Expect(gone(getInst(ns, "p-a"))()).To(BeTrue(), "nothing created")
}
