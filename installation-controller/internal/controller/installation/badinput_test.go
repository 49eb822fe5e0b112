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
)

func failsWith(g Gomega, ns, name, reason string, message ...string) *lsv1alpha1.Installation {
	g.Eventually(getInst(ns, name), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
		HaveField("Status.LastError.Reason", reason),
		HaveField("Status.LastError.Codes", ContainElement(lsv1alpha1.ErrorConfigurationProblem))))
	inst, _ := getInst(ns, name)()
	for _, m := range message {
		g.Expect(inst.Status.LastError.Message).To(ContainSubstring(m))
	}
	g.Expect(inst.Status.Conditions).To(ContainElement(And(HaveField("Type", lsv1alpha1.ConditionReady), HaveField("Reason", reason))))
	return inst
}

func TestImportDoesNotExist(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "config", DataRef: "nope"}}
	create(g, inst)
	failsWith(g, ns, "root", "ImportNotFound", `data import "config": DataObject `+ns+`/nope does not exist`)
}

func TestImportFailsSchema(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "replicas"), Data: lsv1alpha1.NewAnyJSON([]byte(`"three"`))})
	fs := map[string]string{"blueprint.yaml": `imports:
- name: replicas
  type: data
  schema:
    type: integer
    minimum: 1
`}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "replicas", DataRef: "replicas"}}
	create(g, inst)
	failsWith(g, ns, "root", "ImportInvalid", `import "replicas"`, "does not match its schema", "got string, want integer")
}

func TestRequiredImportMissing(t *testing.T) {
	ns, g := setup(t)
	fs := map[string]string{"blueprint.yaml": "imports:\n- name: cluster\n  type: target\n"}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	failsWith(g, ns, "root", "ImportInvalid", `import "cluster": the blueprint requires this target import`, "spec.imports.targets")
}

// A template that does not render names the execution, the file, the line,
// and quotes the offending source.
func TestTemplateDoesNotRender(t *testing.T) {
	ns, g := setup(t)
	fs := map[string]string{"blueprint.yaml": `deployExecutions:
- name: broken
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      config: {{ if not .imports.config }}{{ fail "config is missing" }}{{ end }}
`}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	inst := failsWith(g, ns, "root", "TemplateFailed", `execution "broken" (blueprint.yaml, line 8): render failed`, "config is missing",
		`>    8 |   config: {{ if not .imports.config }}{{ fail "config is missing" }}{{ end }}`)
	g.Expect(inst.Status.LastError.Operation).To(Equal("Init"))
}

// Rendered output that is not YAML quotes the rendered snippet.
func TestTemplateRendersInvalidYAML(t *testing.T) {
	ns, g := setup(t)
	create(g, &corev1.ConfigMap{ObjectMeta: metaNS(ns, "cm"), Data: map[string]string{"name": "a: b"}})
	fs := map[string]string{"blueprint.yaml": `deployExecutions:
- name: items
  type: GoTemplate
  file: deploy.tpl
`, "deploy.tpl": "deployItems:\n- name: {{ .imports.name }}\n  type: x\n"}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "name", ConfigMapRef: &lsv1alpha1.LocalConfigMapReference{Name: "cm", Key: "name"}}}
	create(g, inst)
	failsWith(g, ns, "root", "TemplateFailed", `execution "items" (deploy.tpl): yaml failed`, "rendered output, line 2", ">    2 | - name: a: b")
}

// The API server refuses a blueprint without blueprint.yaml; the controller
// would report it too (see the blueprint package's tests).
func TestBlueprintWithoutBlueprintYAMLIsRefused(t *testing.T) {
	ns, g := setup(t)
	err := env.Client.Create(context.Background(), newInstallation(ns, "root", map[string]string{"other.yaml": "x"}, reconcileAnnotation...))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("must contain blueprint.yaml"))
}

// A blueprint.yaml that is not a valid blueprint fails the job.
func TestInvalidBlueprint(t *testing.T) {
	ns, g := setup(t)
	create(g, newInstallation(ns, "root", map[string]string{"blueprint.yaml": "deployExecutions:\n- name: x\n  type: Spiff\n"}, reconcileAnnotation...))
	failsWith(g, ns, "root", "BlueprintInvalid", `blueprint: blueprint.yaml:2: execution "x" has type "Spiff"`)
}

// A missing "default" Context counts as empty (every other test); another
// missing Context is an error.
func TestMissingContext(t *testing.T) {
	ns, g := setup(t)
	inst := newInstallation(ns, "root", simpleBlueprint(""), reconcileAnnotation...)
	inst.Spec.Context = "custom"
	create(g, inst)
	failsWith(g, ns, "root", "ContextNotFound", "Context "+ns+"/custom (spec.context) does not exist")
}

// CEL import and export data mappings, Secret imports, target imports with
// `target: {import: ...}`, and the Context's configurations.
func TestMappingsTargetsAndContext(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	create(g, &corev1.Secret{ObjectMeta: metaNS(ns, "creds"), StringData: map[string]string{"user": "admin"}})
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "size"), Data: lsv1alpha1.NewAnyJSON([]byte(`{"replicas": 2}`))})
	create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, "my-cluster"), Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType}})
	create(g, &lsv1alpha1.Context{ObjectMeta: metaNS(ns, "default"), Configurations: map[string]lsv1alpha1.AnyJSON{"region": lsv1alpha1.NewAnyJSON([]byte(`"eu"`))}})
	fs := map[string]string{"blueprint.yaml": `imports:
- name: replicas
  type: data
  schema: {type: integer}
- name: user
  type: data
- name: cluster
  type: target
  targetType: landscaper.gardener.cloud/kubernetes-cluster
exports:
- name: summary
  type: data
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: app
      type: landscaper.gardener.cloud/mock
      target:
        import: cluster
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        export:
          replicas: {{ .imports.replicas }}
          user: {{ .imports.user }}
          region: {{ .context.region }}
          cluster: {{ .imports.cluster.metadata.name }}
exportExecutions:
- name: e
  type: GoTemplate
  template: |
    exports:
      summary: {{ toYaml .values.deployitems.app | nindent 8 }}
`}
	inst := newInstallation(ns, "root", fs, reconcileAnnotation...)
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{
		{Name: "size", DataRef: "size"},
		{Name: "user", SecretRef: &lsv1alpha1.LocalSecretReference{Name: "creds", Key: "user"}},
	}
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "cluster", Target: "my-cluster"}}
	inst.Spec.ImportDataMappings = map[string]lsv1alpha1.AnyJSON{"replicas": lsv1alpha1.NewAnyJSON(mustJSON("cel: imports.size.replicas * 2"))}
	inst.Spec.ExportDataMappings = map[string]lsv1alpha1.AnyJSON{"doubled": lsv1alpha1.NewAnyJSON(mustJSON(`cel: exports.summary.user + "@" + exports.summary.region`))}
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "summary", DataRef: "summary"}, {Name: "doubled", DataRef: "who"}}
	create(g, inst)
	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, "root")(); return lastError(i) })

	exec, _ := getExec(ns, "root")()
	g.Expect(exec.Spec.DeployItems[0].Target).To(Equal(&lsv1alpha1.ObjectReference{Name: "my-cluster"}))
	var summary map[string]any
	do := &lsv1alpha1.DataObject{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "summary"}, do)).To(Succeed())
	g.Expect(json.Unmarshal(do.Data.RawMessage, &summary)).To(Succeed())
	g.Expect(summary).To(Equal(map[string]any{"replicas": float64(4), "user": "admin", "region": "eu", "cluster": "my-cluster"}))
	var who string
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "who"}, do)).To(Succeed())
	g.Expect(json.Unmarshal(do.Data.RawMessage, &who)).To(Succeed())
	g.Expect(who).To(Equal("admin@eu"))
}

// What the API server refuses never succeeds on a retry: an Execution the
// schema refuses (a deploy item that depends on itself) fails the job at once
// with TemplateFailed, and the installation can then be deleted.
func TestRenderedExecutionRefusedByTheAPIServer(t *testing.T) {
	ns, g := setup(t)
	fs := map[string]string{"blueprint.yaml": `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: loop
      type: landscaper.gardener.cloud/mock
      dependsOn: [loop]
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
`}
	create(g, newInstallation(ns, "root", fs, reconcileAnnotation...))
	inst := failsWith(g, ns, "root", "TemplateFailed", "creating execution", "refuses what the blueprint rendered", "cannot depend on itself")
	g.Expect(env.Client.Delete(context.Background(), inst)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
}

// A sub-installation whose name an unrelated installation has taken fails
// the job (it would never be created), instead of being retried for ever.
func TestSubInstallationNameTakenByAnotherInstallation(t *testing.T) {
	ns, g := setup(t)
	// An unrelated root with the name the sub-installation "db" of "app" gets.
	create(g, newInstallation(ns, "app-db", simpleBlueprint("")))
	fs := map[string]string{
		"blueprint.yaml": `subinstallations:
- name: db
  blueprint:
    dir: db
`,
		"db/blueprint.yaml": simpleBlueprint("")["blueprint.yaml"],
	}
	create(g, newInstallation(ns, "app", fs, reconcileAnnotation...))
	inst := failsWith(g, ns, "app", "TemplateFailed", `creating subinstallation "db"`, "app-db exists but does not belong to this installation")
	g.Expect(env.Client.Delete(context.Background(), inst)).To(Succeed())
	g.Eventually(gone(getInst(ns, "app")), timeout, interval).Should(BeTrue())
	other, err := getInst(ns, "app-db")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.DeletionTimestamp).To(BeNil(), "the unrelated installation is left alone")
}
