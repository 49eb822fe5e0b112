package installation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/status"
)

// selfReproducing is a blueprint whose one sub-installation runs the
// blueprint itself, passed down as the import "self".
const selfReproducing = `imports:
- name: self
  type: data
subinstallationExecutions:
- name: again
  type: GoTemplate
  template: |
    subinstallations:
    - name: again
      blueprint:
        filesystem:
          blueprint.yaml: {{ .imports.self | toJson }}
      imports:
        data:
        - name: self
          dataRef: self
`

// eventNotes are the notes of the events of reason in ns.
func eventNotes(ctx context.Context, ns, reason string) ([]string, error) {
	evs := &corev1.EventList{}
	err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFields{"reason": reason})
	out := make([]string, 0, len(evs.Items))
	for _, e := range evs.Items {
		out = append(out, e.Message)
	}
	return out, err
}

// A blueprint that reproduces itself stops at the depth bound: the
// installation at the deepest depth fails naming the bound and its flag,
// the root fails with that cause, only the installations down to the
// bound exist, and another tenant's installation still succeeds.
func TestSelfReproducingBlueprintStopsAtTheDepthBound(t *testing.T) {
	ns, g := setup(t)
	other, _ := setup(t)
	ctx := context.Background()
	self, err := json.Marshal(selfReproducing)
	g.Expect(err).NotTo(HaveOccurred())
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "self"), Data: lsv1alpha1.NewAnyJSON(self)})
	root := newInstallation(ns, "root", map[string]string{"blueprint.yaml": selfReproducing}, reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "self", DataRef: "self"}}
	create(g, root)
	create(g, newInstallation(other, "tenant", simpleBlueprint(""), reconcileAnnotation...))

	bound := fmt.Sprintf("sub-installations nest at most %d levels deep under a root (%s)",
		installation.DefaultMaxSubInstallationDepth, installation.FlagMaxSubInstallationDepth)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		WithTransform(lastError, ContainSubstring(bound))))
	g.Eventually(getInst(other, "tenant"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))

	list := &lsv1alpha1.InstallationList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(installation.DefaultMaxSubInstallationDepth + 1))
	var deepest *lsv1alpha1.Installation
	for i := range list.Items {
		if deepest == nil || len(list.Items[i].Name) > len(deepest.Name) {
			deepest = &list.Items[i]
		}
	}
	g.Expect(deepest.Status.LastError).NotTo(BeNil())
	g.Expect(deepest.Status.LastError.Reason).To(Equal(installation.ReasonSubInstallationLimit))
	g.Expect(deepest.Status.LastError.Message).To(ContainSubstring(bound))
}

// A blueprint rendering more sub-installations than one blueprint may have
// fails before it creates any.
func TestTooManySubInstallationsPerBlueprint(t *testing.T) {
	ns, g := setup(t)
	n := installation.DefaultMaxSubInstallationsPerBlueprint + 1
	fs := map[string]string{"blueprint.yaml": fmt.Sprintf(`subinstallationExecutions:
- name: many
  type: GoTemplate
  template: |
    subinstallations:
    {{- range until %d }}
    - name: sub-{{ . }}
      blueprint:
        filesystem:
          blueprint.yaml: "{}"
    {{- end }}
`, n)}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	failsWith(g, ns, "root", installation.ReasonSubInstallationLimit,
		fmt.Sprintf("the blueprint renders %d sub-installations, more than %d, the bound of one blueprint (%s)",
			n, installation.DefaultMaxSubInstallationsPerBlueprint, installation.FlagMaxSubInstallationsPerBlueprint))
	list := &lsv1alpha1.InstallationList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
}

// largeDataObject holds a JSON string of about size bytes.
func largeDataObject(ns, name string, size int) *lsv1alpha1.DataObject {
	return &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, name), Data: lsv1alpha1.NewAnyJSON([]byte(strconv.Quote(strings.Repeat("x", size))))}
}

// Hundreds of imports, or a few of one large object, are refused with the
// bound and its flag; the bytes bound stops reading at the import that
// crosses it.
func TestImportBounds(t *testing.T) {
	ns, g := setup(t)
	create(g, largeDataObject(ns, "big", 1<<20))
	imports := func(n int) []lsv1alpha1.DataImport {
		out := make([]lsv1alpha1.DataImport, n)
		for i := range out {
			out[i] = lsv1alpha1.DataImport{Name: fmt.Sprintf("i%d", i), DataRef: "big"}
		}
		return out
	}
	many := newInstallation(ns, "many", simpleBlueprint(""), reconcileAnnotation...)
	many.Spec.Imports.Data = imports(250)
	create(g, many)
	large := newInstallation(ns, "large", simpleBlueprint(""), reconcileAnnotation...)
	large.Spec.Imports.Data = imports(8)
	create(g, large)

	failsWith(g, ns, "many", installation.ReasonImportLimit,
		fmt.Sprintf("the installation has 250 imports (data and targets), more than %d, the bound of one installation (%s)",
			installation.DefaultMaxImports, installation.FlagMaxImports))
	failsWith(g, ns, "large", installation.ReasonImportLimit,
		fmt.Sprintf("the imports hold more than %d bytes, the bound of one installation's imports (%s): data import \"i3\" brings them",
			installation.DefaultMaxImportBytes, installation.FlagMaxImportBytes))
}

// A message longer than a status message may be is cut to
// status.MaxMessage, and its Event to what the API server accepts (it
// refuses a longer note, and the Event is lost).
func TestLongMessagesAreCut(t *testing.T) {
	ns, g := setup(t)
	fs := map[string]string{"blueprint.yaml": `deployExecutions:
- name: long
  type: GoTemplate
  template: |
    {{ fail (printf "start %s end" (repeat 40000 "y")) }}
`}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	inst := failsWith(g, ns, "root", "TemplateFailed", "start yyy")
	g.Expect(len(inst.Status.LastError.Message)).To(BeNumerically("<=", status.MaxMessage))
	for _, c := range inst.Status.Conditions {
		g.Expect(len(c.Message)).To(BeNumerically("<=", status.MaxMessage))
	}
	g.Eventually(func() ([]string, error) { return eventNotes(context.Background(), ns, "TemplateFailed") }, timeout, interval).
		Should(ConsistOf(And(HavePrefix(`execution "long"`), WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", status.MaxEventNote)))))
}

// The value of an import read from a Secret never appears in status or
// events, though the template's error quotes it; in a sub-installation
// that imports it from its parent's context neither.
func TestSecretImportValuesAreNeverQuoted(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	const secret = "s3cr3t-Value-0815"
	create(g, &corev1.Secret{ObjectMeta: metaNS(ns, "creds"), StringData: map[string]string{"password": secret}})
	failing := func(name string) string {
		return `imports:
- name: password
  type: data
deployExecutions:
- name: ` + name + `
  type: GoTemplate
  template: |
    {{ fail (printf "cannot use %s (%q)" .imports.password .imports.password) }}
`
	}
	withSub := `imports:
- name: password
  type: data
subinstallations:
- name: child
  blueprint:
    filesystem:
      blueprint.yaml: ` + strconv.Quote(failing("child")) + `
  imports:
    data:
    - name: password
      dataRef: password
`
	for name, bp := range map[string]string{"direct": failing("direct"), "parent": withSub} {
		inst := newInstallation(ns, name, map[string]string{"blueprint.yaml": bp}, reconcileAnnotation...)
		inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "password", SecretRef: &lsv1alpha1.LocalSecretReference{Name: "creds", Key: "password"}}}
		create(g, inst)
	}
	for _, name := range []string{"direct", "parent", "parent-child"} {
		g.Eventually(getInst(ns, name), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
		inst, _ := getInst(ns, name)()
		g.Expect(inst.Status.LastError.Message).To(ContainSubstring("cannot use " + installation.Redacted))
		g.Expect(inst.Status.LastError.Message).NotTo(ContainSubstring(secret))
		for _, c := range inst.Status.Conditions {
			g.Expect(c.Message).NotTo(ContainSubstring(secret))
		}
	}
	evs := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	g.Expect(evs.Items).NotTo(BeEmpty())
	for _, e := range evs.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(secret))
	}
}

// A job whose render took its process down (the render mark of another
// process for this very job) is failed with RenderAborted instead of
// rendered again: no execution is created, and the mark is gone.
func TestJobThatDiedWhileRenderingFails(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	inst := newInstallation(ns, "root", simpleBlueprint(""))
	create(g, inst)
	// The job the reconcile annotation starts: its ID is derived from the
	// state it starts from (no job yet, generation 1), as the process that
	// died derived it.
	job := jobid.Derive(string(inst.UID), "", "", "false", strconv.FormatInt(inst.Generation, 10))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		installation.RenderingAnnotation, job+"@an-earlier-process", lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
	g.Expect(env.Client.Patch(ctx, inst, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())

	g.Eventually(getInst(ns, "root"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.JobID", job),
		HaveField("Status.LastError.Reason", installation.ReasonRenderAborted),
		WithTransform(lastError, ContainSubstring("the controller process an-earlier-process stopped while it rendered the templates or data mappings of job "+job))))
	got, _ := getInst(ns, "root")()
	g.Expect(got.Annotations).NotTo(HaveKey(installation.RenderingAnnotation))
	_, err := getExec(ns, "root")()
	g.Expect(err).To(HaveOccurred(), "the job was rendered again: its execution exists")
}
