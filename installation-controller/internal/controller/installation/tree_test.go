package installation_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// treeFS is a root blueprint with sub-installations a and b; b imports a's
// export; both have an execution with one mock item; the root exports b's
// export.
func treeFS() map[string]string {
	return map[string]string{
		"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: greeting
  type: data
  schema: {type: string}
exports:
- name: url
  type: data
  schema: {type: string}
subinstallations:
- file: installations/a.yaml
- name: b
  blueprint:
    dir: b
  imports:
    data:
    - name: endpoint
      dataRef: a-endpoint
    - name: greeting
      dataRef: greeting
  exports:
    data:
    - name: url
      dataRef: b-url
exportExecutions:
- name: root-exports
  type: GoTemplate
  template: |
    exports:
      url: {{ index .values.dataobjects "b-url" }}
`,
		"installations/a.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: InstallationTemplate
name: a
blueprint:
  dir: a
exports:
  data:
  - name: endpoint
    dataRef: a-endpoint
`,
		"a/blueprint.yaml": `exports:
- name: endpoint
  type: data
  schema: {type: string}
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
        export:
          host: a.example.com
exportExecutions:
- name: export
  type: GoTemplate
  template: |
    exports:
      endpoint: https://{{ .values.deployitems.server.host }}
`,
		"b/blueprint.yaml": `imports:
- name: endpoint
  type: data
  schema: {type: string}
- name: greeting
  type: data
exports:
- name: url
  type: data
deployExecutions:
- name: deploy
  type: GoTemplate
  template: |
    deployItems:
    - name: client
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        export:
          url: {{ .imports.endpoint }}/{{ .imports.greeting }}
exportExecutions:
- name: export
  type: GoTemplate
  template: |
    exports:
      url: {{ .values.deployitems.client.url }}
`,
	}
}

// The tree: root → a, b (b imports a's export) → executions → mock items.
func TestTree(t *testing.T) {
	ns, g := setup(t)
	rec := record(t, ns)
	ctx := context.Background()
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "greeting"), Data: lsv1alpha1.NewAnyJSON([]byte(`"hello"`))})
	root := newInstallation(ns, "root", treeFS(), reconcileAnnotation...)
	root.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "greeting", DataRef: "greeting"}}
	root.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "url", DataRef: "root-url"}}
	create(g, root)

	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string {
		r, _ := getInst(ns, "root")()
		return lastError(r)
	})
	r, _ := getInst(ns, "root")()
	job := r.Status.JobID
	g.Expect(r.Status.InstallationReferences).To(HaveLen(2))

	// Job IDs are equal through the tree.
	for _, name := range []string{"root-a", "root-b"} {
		sub, err := getInst(ns, name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sub.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), name)
		g.Expect(sub.Status.JobID).To(Equal(job), name)
		g.Expect(sub.Status.JobIDFinished).To(Equal(job), name)
		g.Expect(sub.Labels).To(HaveKeyWithValue(lsv1alpha1.EncompassedByLabel, "root"))
		exec, err := getExec(ns, name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exec.Status.JobIDFinished).To(Equal(job), name)
		g.Expect(exec.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), name)
	}

	// a finished before b started (b left Init only after a's job ended).
	aDone := rec.index(func(i *lsv1alpha1.Installation) bool {
		return i.Name == "root-a" && i.Status.JobIDFinished == job
	})
	bStarted := rec.index(func(i *lsv1alpha1.Installation) bool {
		return i.Name == "root-b" && i.Status.JobID == job && i.Status.Phase != lsv1alpha1.PhaseInit && i.Status.Phase != lsv1alpha1.PhaseSucceeded && i.Status.Phase != ""
	})
	g.Expect(aDone).To(BeNumerically(">=", 0))
	g.Expect(bStarted).To(BeNumerically(">", aDone))

	// Sibling exports are context-scoped DataObjects; the root's export is
	// written verbatim.
	var endpoint, url any
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root.a-endpoint"}, do)).To(Succeed())
	g.Expect(json.Unmarshal(do.Data.RawMessage, &endpoint)).To(Succeed())
	g.Expect(endpoint).To(Equal("https://a.example.com"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root-url"}, do)).To(Succeed())
	g.Expect(json.Unmarshal(do.Data.RawMessage, &url)).To(Succeed())
	g.Expect(url).To(Equal("https://a.example.com/hello"))
}
