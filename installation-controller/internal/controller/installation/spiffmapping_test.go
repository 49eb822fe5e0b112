package installation_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// mappingBlueprint imports name and settings and hands both to its mock
// item's config.
var mappingBlueprint = map[string]string{"blueprint.yaml": `imports:
- name: name
  type: data
  schema: {type: string}
- name: settings
  type: data
  schema: {type: object}
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: app
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        name: {{ .imports.name }}
        settings: {{ toJson .imports.settings }}
`}

// Import data mappings written as Landscaper writes them: a Spiff
// concatenation of two imports and a literal map with a nested reference;
// the execution's deploy item receives the mapped values.
func TestSpiffImportDataMappings(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "a"), Data: lsv1alpha1.NewAnyJSON([]byte(`"web"`))})
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "b"), Data: lsv1alpha1.NewAnyJSON([]byte(`{"zone": "eu-1"}`))})
	inst := newInstallation(ns, "root", mappingBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "a", DataRef: "a"}, {Name: "b", DataRef: "b"}}
	inst.Spec.ImportDataMappings = map[string]lsv1alpha1.AnyJSON{
		"name":     lsv1alpha1.NewAnyJSON([]byte(`"(( a \"-\" b.zone ))"`)),
		"settings": lsv1alpha1.NewAnyJSON([]byte(`{"replicas": 3, "tls": true, "zones": ["x", "(( b.zone ))"], "owner": "team (( a ))"}`)),
	}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	exec, err := getExec(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.Spec.DeployItems).To(HaveLen(1))
	var cfg map[string]any
	g.Expect(json.Unmarshal(exec.Spec.DeployItems[0].Config.Raw, &cfg)).To(Succeed())
	g.Expect(cfg).To(HaveKeyWithValue("name", "web-eu-1"))
	g.Expect(cfg).To(HaveKeyWithValue("settings", map[string]any{
		"replicas": float64(3), "tls": true, "zones": []any{"x", "eu-1"}, "owner": "team (( a ))"}))
}

// A mapping outside the supported Spiff subset fails the job with the
// mapping, the offset and what is not supported, instead of passing as a
// literal.
func TestSpiffImportDataMappingOutsideTheSubset(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "root", mappingBlueprint, reconcileAnnotation...)
	inst.Spec.ImportDataMappings = map[string]lsv1alpha1.AnyJSON{
		"settings": lsv1alpha1.NewAnyJSON([]byte(`{"base": "(( merge ))"}`)),
	}
	create(g, inst)
	failsWith(g, ns, "root", "DataMappingFailed", `importDataMappings: data mapping "settings".base`,
		`at offset 3: "merge" (merging with a stub) is Spiff that Terrace's data mappings do not support`)
}

// A reference to an import that does not exist fails the job naming it.
func TestSpiffImportDataMappingUnknownImport(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "root", mappingBlueprint, reconcileAnnotation...)
	inst.Spec.ImportDataMappings = map[string]lsv1alpha1.AnyJSON{"name": lsv1alpha1.NewAnyJSON([]byte(`"(( nosuch ))"`))}
	create(g, inst)
	failsWith(g, ns, "root", "DataMappingFailed", `data mapping "name"`, `at offset 3: import "nosuch" is not defined`)
}
