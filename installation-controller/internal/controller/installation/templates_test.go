package installation_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// stateBlueprint keeps a generated password in the deploy execution's state
// (Landscaper's state example) and counts the export execution's renders in
// its own state.
func stateBlueprint() map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
exports:
- name: renders
  type: data
  schema: {type: integer}
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    {{- $password := default (randAlphaNum 24) .state.password }}
    deployItems:
    - name: db
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        providerStatus:
          password: {{ $password }}
    state:
      password: {{ $password }}
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    {{- $n := add1 (default 0 .state.renders) }}
    exports:
      renders: {{ $n }}
    state:
      renders: {{ $n }}
`}
}

func itemConfig(g Gomega, ns, name string) string {
	exec, err := getExec(ns, name)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.Spec.DeployItems).NotTo(BeEmpty())
	return string(exec.Spec.DeployItems[0].Config.Raw)
}

func dataObject(g Gomega, ns, name string) string {
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, do)).To(Succeed())
	return string(do.Data.RawMessage)
}

// Each execution reads back the state it rendered in the job before; the
// state is kept in a Secret of the installation, deleted with it.
func TestTemplateStateIsKeptBetweenJobsAndDeletedWithTheInstallation(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "db", stateBlueprint(), reconcileAnnotation...)
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "renders", DataRef: "renders"}}
	create(g, inst)
	g.Eventually(getInst(ns, "db"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "db")(); return lastError(i) })
	first := itemConfig(g, ns, "db")
	g.Expect(dataObject(g, ns, "renders")).To(MatchJSON(`1`))

	got, _ := getInst(ns, "db")()
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: installation.TemplateStateSecretName(got)}
	g.Expect(env.Client.Get(context.Background(), key, sec)).To(Succeed())
	g.Expect(sec.Labels).To(HaveKeyWithValue(installation.TemplateStateLabel, "db"))
	var state map[string]map[string]any
	g.Expect(json.Unmarshal(sec.Data["state"], &state)).To(Succeed())
	g.Expect(first).To(ContainSubstring(state["deploy/default"]["password"].(string)))

	job := got.Status.JobID
	annotate(g, got, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "db"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded), HaveField("Status.JobID", Not(Equal(job)))))
	g.Expect(itemConfig(g, ns, "db")).To(Equal(first), "the second job renders the password of the first")
	g.Expect(dataObject(g, ns, "renders")).To(MatchJSON(`2`), "the export execution read its own state")

	g.Expect(env.Client.Delete(context.Background(), got)).To(Succeed())
	g.Eventually(gone(getInst(ns, "db")), timeout, interval).Should(BeTrue())
	err := env.Client.Get(context.Background(), key, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the state Secret goes with the installation: %v", err)
}

// A state over --max-template-state-bytes fails the job naming the bound.
func TestTemplateStateOverItsBoundFails(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "big", map[string]string{"blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems: []
    state:
      blob: {{ repeat 300000 "x" }}
`}, reconcileAnnotation...))
	g.Eventually(getInst(ns, "big"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	got, _ := getInst(ns, "big")()
	g.Expect(lastError(got)).To(ContainSubstring("TemplateStateInvalid: the template state (what the executions render under `state:`, as JSON) is 300030 bytes, more than 262144, the bound of one installation's state (--max-template-state-bytes); the largest is that of execution deploy/default"))
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: installation.TemplateStateSecretName(got)}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is stored: %v", err)
}

// A Secret of the state's name that is not the installation's state is
// neither read nor overwritten.
func TestTemplateStateNeverTakesAnotherSecret(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "db", stateBlueprint())
	create(g, &corev1.Secret{ObjectMeta: metaNS(ns, installation.TemplateStateSecretName(inst)), StringData: map[string]string{"state": "mine"}})
	inst.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	create(g, inst)
	g.Eventually(getInst(ns, "db"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	got, _ := getInst(ns, "db")()
	g.Expect(lastError(got)).To(ContainSubstring("TemplateStateInvalid: Secret " + installation.TemplateStateSecretName(inst) + ", where this installation keeps its template state, exists and is not labelled"))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: installation.TemplateStateSecretName(inst)}, sec)).To(Succeed())
	g.Expect(string(sec.Data["state"])).To(Equal("mine"))
}

// A deploy execution read from a file of the blueprint (file:) includes
// another file with include and reads one with readFile, as Landscaper's
// templating documentation shows, through the chain to Succeeded.
func TestTemplatesReadTheBlueprintFilesystem(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "files", map[string]string{
		"blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  file: data/template
`,
		"data/template": `deployItems:
- name: item
  type: landscaper.gardener.cloud/mock
  config:
{{ include "data/config" (dict "name" .installation.name) | indent 4 }}
`,
		"data/config": `apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
kind: ProviderConfiguration
providerStatus:
  greeting: {{ readFile "data/greeting.txt" | trim }} {{ .name }}
`,
		"data/greeting.txt": "hello from a file\n",
	}, reconcileAnnotation...))
	g.Eventually(getInst(ns, "files"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "files")(); return lastError(i) })
	g.Expect(itemConfig(g, ns, "files")).To(ContainSubstring(`"greeting":"hello from a file files"`))
}
