package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// exportBindingsBlueprint exports values read through each of the export
// executions' bindings: its own deploy item's export (.deployitems), a
// sub-installation's data export (.dataobjects) and target export
// (.targets), and the older .values form. exportExpr is the template line
// of export "url".
func exportBindingsBlueprint(exportExpr string) map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
exports:
- name: url
  type: data
  schema: {type: string}
- name: legacy
  type: data
- name: clusterType
  type: data
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: ingress
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        export:
          prefix: my-pref
    - name: quiet
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
subinstallations:
- apiVersion: landscaper.gardener.cloud/v1alpha1
  kind: InstallationTemplate
  name: dns
  blueprint:
    dir: dns
  exports:
    data:
    - name: domain
      dataRef: domain
    targets:
    - name: cluster
      target: dev-cluster
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      url: ` + exportExpr + `
      legacy: {{ index .values "deployitems" "ingress" "prefix" }}.{{ .values.dataobjects.domain }}
      clusterType: {{ index .targets "dev-cluster" "spec" "type" }}
`,
		"dns/blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
exports:
- name: domain
  type: data
  schema: {type: string}
- name: cluster
  type: target
  targetType: landscaper.gardener.cloud/kubernetes-cluster
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: dns
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        export:
          domain: example.com
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      domain: {{ .deployitems.dns.domain }}
      cluster:
        type: landscaper.gardener.cloud/kubernetes-cluster
        config:
          kubeconfig: "apiVersion: v1"
        labels: {env: dev}
        annotations: {team: platform}
`}
}

func installExportBindings(ns, exportExpr string) *lsv1alpha1.Installation {
	inst := newInstallation(ns, "root", exportBindingsBlueprint(exportExpr), reconcileAnnotation...)
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{
		{Name: "url", DataRef: "url"}, {Name: "legacy", DataRef: "legacy"}, {Name: "clusterType", DataRef: "cluster-type"}}
	return inst
}

// Export executions read the documented bindings .deployitems.<item>,
// .dataobjects.<key> and .targets.<key>, and the same under .values, as
// older blueprints do; the job exports what they render, and an exported
// Target keeps the labels and annotations of its export value.
func TestExportExecutionsReadDeployItemsDataObjectsAndTargets(t *testing.T) {
	ns, g := setup(t)
	create(g, installExportBindings(ns, `https://{{ .deployitems.ingress.prefix }}.{{ .dataobjects.domain }}`))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	for name, want := range map[string]string{"url": `"https://my-pref.example.com"`, "legacy": `"my-pref.example.com"`,
		"cluster-type": `"landscaper.gardener.cloud/kubernetes-cluster"`} {
		do := &lsv1alpha1.DataObject{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, do)).To(Succeed())
		g.Expect(string(do.Data.RawMessage)).To(MatchJSON(want), name)
	}
	// The exported Target keeps the labels and annotations of its export
	// value, besides those that place it in the context.
	tgt := &lsv1alpha1.Target{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: installation.ScopedName("root", "dev-cluster")}, tgt)).To(Succeed())
	g.Expect(tgt.Labels).To(And(HaveKeyWithValue("env", "dev"), HaveKeyWithValue(installation.ContextLabel, "root")))
	g.Expect(tgt.Annotations).To(And(HaveKeyWithValue("team", "platform"), HaveKeyWithValue(installation.KeyAnnotation, "dev-cluster")))
	g.Expect(tgt.Spec.Type).To(Equal(lsv1alpha1.KubernetesClusterTargetType))
}

// An export execution that reads a deploy item the execution does not have,
// or one that exported nothing, fails the job naming the binding and the
// items there are; one that reads a data object no sub-installation
// exported names the context's keys.
func TestExportBindingOfAnUnknownNameFailsNamingIt(t *testing.T) {
	for name, tc := range map[string]struct{ expr, want string }{
		"unknown item": {`{{ .deployitems.ingres.prefix }}`,
			`at <.deployitems.ingres.prefix>: nil pointer evaluating interface {}.prefix; the execution has no deploy item "ingres" (its deploy items: ingress, quiet)`},
		"item without exports": {`{{ index .values "deployitems" "quiet" "prefix" }}`,
			`deploy item "quiet" exported nothing`},
		"unknown data object": {`{{ .dataobjects.domian.host }}`,
			`the installation's context has no data object "domian" (its data objects: domain)`},
	} {
		t.Run(name, func(t *testing.T) {
			ns, g := setup(t)
			create(g, installExportBindings(ns, tc.expr))
			g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
			inst, err := getInst(ns, "root")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lastError(inst)).To(ContainSubstring(`TemplateFailed: execution "default" (blueprint.yaml, line 46): render failed`))
			g.Expect(lastError(inst)).To(ContainSubstring(tc.want))
		})
	}
}
