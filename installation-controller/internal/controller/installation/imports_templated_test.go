package installation_test

import (
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// importExecutionsBlueprint validates its imports and derives a binding the
// deploy and export executions read as .imports.url.
func importExecutionsBlueprint() map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: domain
  type: data
  schema: {type: string}
- name: replicas
  type: data
  schema: {type: integer}
exports:
- name: url
  type: data
  schema: {type: string}
importExecutions:
- name: derive
  type: GoTemplate
  template: |
    bindings:
      url: https://app.{{ .imports.domain }}
- name: validate
  type: GoTemplate
  template: |
    errors:
    {{- if gt (int .imports.replicas) 5 }}
    - replicas must be at most 5, got {{ .imports.replicas }}
    {{- end }}
    {{- if not (hasSuffix ".com" .imports.domain) }}
    - domain {{ .imports.domain }} is not a .com domain
    {{- end }}
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
        providerStatus:
          url: {{ .imports.url }}
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      url: {{ .imports.url }}
`}
}

func installImportExecutions(g Gomega, ns, domain, replicas string) {
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "domain"), Data: lsv1alpha1.NewAnyJSON([]byte(domain))})
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "replicas"), Data: lsv1alpha1.NewAnyJSON([]byte(replicas))})
	inst := newInstallation(ns, "app", importExecutionsBlueprint(), reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "domain", DataRef: "domain"}, {Name: "replicas", DataRef: "replicas"}}
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "url", DataRef: "app-url"}}
	create(g, inst)
}

func TestImportExecutionBindingsReachEveryExecution(t *testing.T) {
	ns, g := setup(t)
	installImportExecutions(g, ns, `"example.com"`, `3`)
	g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "app")(); return lastError(i) })
	g.Expect(itemConfig(g, ns, "app")).To(ContainSubstring(`"url":"https://app.example.com"`))
	g.Expect(dataObject(g, ns, "app-url")).To(MatchJSON(`"https://app.example.com"`))
}

func TestImportExecutionErrorsFailTheInstallation(t *testing.T) {
	ns, g := setup(t)
	installImportExecutions(g, ns, `"example.org"`, `7`)
	g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	got, _ := getInst(ns, "app")()
	g.Expect(lastError(got)).To(Equal(`ImportExecutionFailed: import execution "validate" (blueprint.yaml) refuses the imports: replicas must be at most 5, got 7; domain example.org is not a .com domain`))
	_, err := getExec(ns, "app")()
	g.Expect(err).To(HaveOccurred(), "nothing is deployed")
}

// conditionalBlueprint is shaped like Landscaper's conditional imports
// example: the password is only needed when the optional URL is set.
func conditionalBlueprint() map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: backup-storage-url
  type: data
  required: false
  schema: {type: string}
  imports:
  - name: backup-storage-password
    type: data
    schema: {type: string}
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
        providerStatus:
          backup: {{ if index .imports "backup-storage-url" }}enabled{{ else }}disabled{{ end }}
`}
}

func TestConditionalImportsThroughTheChain(t *testing.T) {
	for name, tc := range map[string]struct {
		imports []string
		phase   lsv1alpha1.Phase
		want    string
	}{
		"neither":  {nil, lsv1alpha1.PhaseSucceeded, `"backup":"disabled"`},
		"both":     {[]string{"backup-storage-url", "backup-storage-password"}, lsv1alpha1.PhaseSucceeded, `"backup":"enabled"`},
		"url only": {[]string{"backup-storage-url"}, lsv1alpha1.PhaseFailed, `ImportInvalid: import "backup-storage-password": the blueprint requires this data import (a conditional import: required because import "backup-storage-url" is set)`},
	} {
		t.Run(name, func(t *testing.T) {
			ns, g := setup(t)
			inst := newInstallation(ns, "app", conditionalBlueprint(), reconcileAnnotation...)
			for _, imp := range tc.imports {
				create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, imp), Data: lsv1alpha1.NewAnyJSON([]byte(`"v"`))})
				inst.Spec.Imports.Data = append(inst.Spec.Imports.Data, lsv1alpha1.DataImport{Name: imp, DataRef: imp})
			}
			create(g, inst)
			g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(tc.phase), func() string { i, _ := getInst(ns, "app")(); return lastError(i) })
			if tc.phase == lsv1alpha1.PhaseSucceeded {
				g.Expect(itemConfig(g, ns, "app")).To(ContainSubstring(tc.want))
				return
			}
			got, _ := getInst(ns, "app")()
			g.Expect(lastError(got)).To(ContainSubstring(tc.want))
		})
	}
}

// schemaRefsBlueprint declares its import's schema through a local type
// that refers to a JSON file of the blueprint, in draft 7.
func schemaRefsBlueprint(ref string) map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
jsonSchemaVersion: "https://json-schema.org/draft-07/schema"
localTypes:
  endpoint:
    type: object
    required: [port]
    properties:
      port: {$ref: "blueprint://schemas/port.json"}
imports:
- name: endpoint
  type: data
  schema: {$ref: "` + ref + `"}
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
        providerStatus:
          port: {{ .imports.endpoint.port }}
`, "schemas/port.json": `{"type": "integer", "minimum": 1, "maximum": 65535}`}
}

func TestSchemaReferencesThroughTheChain(t *testing.T) {
	for name, tc := range map[string]struct {
		ref, value string
		phase      lsv1alpha1.Phase
		want       string
	}{
		"valid":      {"local://endpoint", `{"port": 8080}`, lsv1alpha1.PhaseSucceeded, `"port":8080`},
		"invalid":    {"local://endpoint", `{"port": 0}`, lsv1alpha1.PhaseFailed, `ImportInvalid: import "endpoint": import endpoint: value does not match its schema: at /port: minimum`},
		"unresolved": {"local://endpoints", `{"port": 8080}`, lsv1alpha1.PhaseFailed, `ImportInvalid: import "endpoint": import endpoint: invalid schema: reference "local://endpoints": the blueprint has no local type "endpoints" in localTypes (it has endpoint)`},
		"no file":    {"blueprint://schemas/endpoint.json", `{"port": 8080}`, lsv1alpha1.PhaseFailed, `ImportInvalid: import "endpoint": import endpoint: invalid schema: reference "blueprint://schemas/endpoint.json": the blueprint's filesystem has no file "schemas/endpoint.json"`},
	} {
		t.Run(name, func(t *testing.T) {
			ns, g := setup(t)
			create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "endpoint"), Data: lsv1alpha1.NewAnyJSON([]byte(tc.value))})
			inst := newInstallation(ns, "app", schemaRefsBlueprint(tc.ref), reconcileAnnotation...)
			inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "endpoint", DataRef: "endpoint"}}
			create(g, inst)
			g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(tc.phase), func() string { i, _ := getInst(ns, "app")(); return lastError(i) })
			if tc.phase == lsv1alpha1.PhaseSucceeded {
				g.Expect(itemConfig(g, ns, "app")).To(ContainSubstring(tc.want))
				return
			}
			got, _ := getInst(ns, "app")()
			g.Expect(lastError(got)).To(ContainSubstring(tc.want))
		})
	}
}

// A sub-installation wired to the parent's optional and conditional
// imports, which the parent does not have, runs without them (Landscaper's
// conditional imports with sub-installation templates).
func TestSubinstallationImportsOfAbsentConditionalImportsAreDropped(t *testing.T) {
	ns, g := setup(t)
	fs := map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: foo
  required: false
  schema: {type: string}
  imports:
  - name: bar
    schema: {type: string}
subinstallations:
- apiVersion: landscaper.gardener.cloud/v1alpha1
  kind: InstallationTemplate
  name: subinst-import
  imports:
    data:
    - name: internalFoo
      dataRef: foo
    - name: internalBar
      dataRef: bar
  blueprint:
    dir: sub
`, "sub/blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: internalFoo
  required: false
  schema: {type: string}
- name: internalBar
  required: false
  schema: {type: string}
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
`}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	root, _ := getInst(ns, "root")()
	g.Expect(root.Status.InstallationReferences).To(HaveLen(1))
	sub, err := getInst(ns, root.Status.InstallationReferences[0].Reference.Name)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.Spec.Imports.Data).To(BeEmpty())
}
