package installation_test

import (
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// definitionsBlueprint renders .blueprint and .blueprintDef in each kind of
// execution: its deploy item, its export and its sub-installation's name
// come from spec.blueprint.ref; the sub-installation (blueprint dir sub,
// so inline) renders the file names of its spec.blueprint.inline.
func definitionsBlueprint() map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
exports:
- name: resource
  type: data
  schema: {type: string}
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + indent(mockItem("item", `      blueprint: {{ .blueprint.ref.resourceName }}
      blueprintDef: {{ .blueprintDef.ref.resourceName }}`), 4) + `
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      resource: {{ .blueprint.ref.resourceName }}
subinstallationExecutions:
- name: default
  type: GoTemplate
  template: |
    subinstallations:
    - name: sub-{{ .blueprintDef.ref.resourceName }}
      blueprint:
        dir: sub
`,
		"sub/blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + indent(mockItem("item", `      files: '{{ keys .blueprint.inline.filesystem | sortAlpha | join "," }}'`), 4),
	}
}

// Deploy, export and sub-installation executions get spec.blueprint as
// .blueprint and .blueprintDef, as in Landscaper: a reference to a resource
// of the component version, and an inline blueprint's file system.
func TestExecutionsReadTheBlueprintDefinition(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	push(t, base, componentSpec{name: "example.org/defs", version: "1.0.0",
		blueprints: map[string]map[string]string{"defs-bp": definitionsBlueprint()}})
	inst := componentInstallation(ns, "defs", ociContext(base), "example.org/defs", "1.0.0", "defs-bp")
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "resource", DataRef: "resource"}}
	create(g, inst)

	g.Eventually(getInst(ns, "defs"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "defs")(); return lastError(i) })
	g.Expect(onlyItemConfig(g, ns, "defs")).To(And(ContainSubstring(`"blueprint":"defs-bp"`), ContainSubstring(`"blueprintDef":"defs-bp"`)))
	g.Expect(dataObject(g, ns, "resource")).To(MatchJSON(`"defs-bp"`))
	sub := subInstallation(g, ns, "sub-defs-bp")
	g.Expect(onlyItemConfig(g, ns, sub.Name)).To(ContainSubstring(`"files":"blueprint.yaml"`))
}
