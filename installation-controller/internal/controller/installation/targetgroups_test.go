package installation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
)

// createClusters creates kubernetes-cluster Targets of the given names.
func createClusters(g Gomega, ns string, names ...string) {
	for _, n := range names {
		create(g, &lsv1alpha1.Target{ObjectMeta: metaNS(ns, n), Spec: lsv1alpha1.TargetSpec{
			Type: lsv1alpha1.KubernetesClusterTargetType, Config: ptrJSON(`{"kubeconfig": "cluster ` + n + `"}`)}})
	}
}

func ptrJSON(s string) *lsv1alpha1.AnyJSON {
	v := lsv1alpha1.NewAnyJSON([]byte(s))
	return &v
}

// itemTargets maps an execution's deploy items to the Targets they name,
// and to the "cluster" field of their config.
func itemTargets(g Gomega, ns, exec string) (map[string]string, map[string]any) {
	e, err := getExec(ns, exec)()
	g.Expect(err).NotTo(HaveOccurred())
	targets, clusters := map[string]string{}, map[string]any{}
	for _, it := range e.Spec.DeployItems {
		g.Expect(it.Target).NotTo(BeNil(), it.Name)
		targets[it.Name] = it.Target.Name
		var cfg map[string]any
		g.Expect(json.Unmarshal(it.Config.Raw, &cfg)).To(Succeed())
		clusters[it.Name] = cfg["cluster"]
	}
	return targets, clusters
}

func succeeded(g Gomega, ns, name string) {
	g.Eventually(getInst(ns, name), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded), func() string { i, _ := getInst(ns, name)(); return lastError(i) })
}

// targetListBlueprint is Landscaper's guided-tour example of a targetList:
// one deploy item per Target, addressed by its index.
var targetListBlueprint = map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: clusters
  type: targetList
  targetType: kubernetes-cluster
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    {{- range $idx, $target := .imports.clusters }}
    - name: item-{{ $idx }}
      type: landscaper.gardener.cloud/mock
      target:
        import: clusters
        index: {{ $idx }}
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        cluster: {{ $target.metadata.name }} {{ $target.spec.config.kubeconfig }}
    {{- end }}
`}

// A targetList import (targets: [...]) is a list of Target objects in the
// templates, in the installation's order, and target.index picks one for a
// deploy item; the short targetType is Landscaper's kubernetes-cluster.
func TestTargetListImportRendersOneDeployItemPerTarget(t *testing.T) {
	ns, g := setup(t)
	createClusters(g, ns, "clusterred", "clustergreen", "clusterblue")
	inst := newInstallation(ns, "root", targetListBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "clusters", Targets: []string{"clusterred", "clustergreen", "clusterblue"}}}
	create(g, inst)
	succeeded(g, ns, "root")

	targets, clusters := itemTargets(g, ns, "root")
	g.Expect(targets).To(Equal(map[string]string{"item-0": "clusterred", "item-1": "clustergreen", "item-2": "clusterblue"}))
	g.Expect(clusters).To(HaveKeyWithValue("item-2", "clusterblue cluster clusterblue"))
}

// targetMapBlueprint is Landscaper's guided-tour example of a targetMap:
// one deploy item per key, with the config entry of the same key.
var targetMapBlueprint = map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: clusters
  type: targetMap
  targetType: landscaper.gardener.cloud/kubernetes-cluster
- name: config
  type: data
  schema: {type: object}
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    {{- $config := .imports.config }}
    deployItems:
    {{- range $key, $target := .imports.clusters }}
    - name: di-{{ $key }}
      type: landscaper.gardener.cloud/mock
      target:
        import: clusters
        key: {{ $key }}
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        cluster: {{ $target.metadata.name }}-{{ index $config $key "color" }}
    {{- end }}
`}

// A targetMap import is a map key → Target object in the templates, and
// target.key picks one for a deploy item.
func TestTargetMapImportRendersOneDeployItemPerKey(t *testing.T) {
	ns, g := setup(t)
	createClusters(g, ns, "cluster-blue", "cluster-green", "cluster-red")
	create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "config"), Data: lsv1alpha1.NewAnyJSON([]byte(
		`{"blue": {"color": "b"}, "green": {"color": "g"}, "red": {"color": "r"}}`))})
	inst := newInstallation(ns, "root", targetMapBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "clusters", TargetMap: map[string]string{"blue": "cluster-blue", "green": "cluster-green", "red": "cluster-red"}}}
	inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "config", DataRef: "config"}}
	create(g, inst)
	succeeded(g, ns, "root")

	targets, clusters := itemTargets(g, ns, "root")
	g.Expect(targets).To(Equal(map[string]string{"di-blue": "cluster-blue", "di-green": "cluster-green", "di-red": "cluster-red"}))
	g.Expect(clusters).To(HaveKeyWithValue("di-green", "cluster-green-g"))
}

// forwardingBlueprint hands its targetList and targetMap imports to
// sub-installations: whole (targetListRef, targetMapRef) and one Target per
// sub-installation ("clusters[<index>]"), as Landscaper's examples do.
var forwardingBlueprint = map[string]string{
	"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
imports:
- name: clusters
  type: targetList
  targetType: landscaper.gardener.cloud/kubernetes-cluster
- name: clustermap
  type: targetMap
  targetType: landscaper.gardener.cloud/kubernetes-cluster
subinstallations:
- apiVersion: landscaper.gardener.cloud/v1alpha1
  kind: InstallationTemplate
  name: all
  blueprint:
    dir: all
  imports:
    targets:
    - name: also-my-targets
      targetListRef: clusters
    - name: also-my-map
      targetMapRef: clustermap
subinstallationExecutions:
- name: per-target
  type: GoTemplate
  template: |
    subinstallations:
    {{- range $idx, $target := .imports.clusters }}
    - apiVersion: landscaper.gardener.cloud/v1alpha1
      kind: InstallationTemplate
      name: one-{{ $idx }}
      blueprint:
        dir: one
      imports:
        targets:
        - name: mytarget
          target: "clusters[{{ $idx }}]"
    {{- end }}
`,
	"all/blueprint.yaml": `imports:
- name: also-my-targets
  type: targetList
- name: also-my-map
  type: targetMap
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    {{- range $idx, $target := index .imports "also-my-targets" }}
    - name: list-{{ $idx }}
      type: landscaper.gardener.cloud/mock
      target: {import: also-my-targets, index: {{ $idx }}}
      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, cluster: {{ $target.spec.config.kubeconfig | quote }}}
    {{- end }}
    {{- range $key, $target := index .imports "also-my-map" }}
    - name: map-{{ $key }}
      type: landscaper.gardener.cloud/mock
      target: {import: also-my-map, key: {{ $key }}}
      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, cluster: {{ $target.spec.config.kubeconfig | quote }}}
    {{- end }}
`,
	"one/blueprint.yaml": `imports:
- name: mytarget
  type: target
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      target: {import: mytarget}
      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, cluster: {{ .imports.mytarget.spec.config.kubeconfig | quote }}}
`,
}

// A parent forwards its targetList and targetMap imports to
// sub-installations whole (targetListRef, targetMapRef) or one Target at a
// time ("clusters[1]"): the sub-installations deploy to the parent's
// context copies of the same Targets.
func TestTargetListAndMapForwardedToSubInstallations(t *testing.T) {
	ns, g := setup(t)
	createClusters(g, ns, "red", "green", "blue")
	inst := newInstallation(ns, "root", forwardingBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{
		{Name: "clusters", Targets: []string{"red", "green"}},
		{Name: "clustermap", TargetMap: map[string]string{"b": "blue", "r": "red"}}}
	create(g, inst)
	succeeded(g, ns, "root")

	_, all := itemTargets(g, ns, installation.SubInstallationName("root", "all"))
	g.Expect(all).To(Equal(map[string]any{"list-0": "cluster red", "list-1": "cluster green", "map-b": "cluster blue", "map-r": "cluster red"}))
	_, one := itemTargets(g, ns, installation.SubInstallationName("root", "one-1"))
	g.Expect(one).To(Equal(map[string]any{"item": "cluster green"}))
	targets, _ := itemTargets(g, ns, installation.SubInstallationName("root", "one-1"))
	copyOf := &lsv1alpha1.Target{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: targets["item"]}, copyOf)).To(Succeed())
	g.Expect(copyOf.Annotations).To(HaveKeyWithValue(installation.KeyAnnotation, "clusters[1]"))
}

// withExtraItem adds a mock deploy item with the given target to the
// blueprint's (last) deploy execution.
func withExtraItem(fs map[string]string, target string) map[string]string {
	out := map[string]string{}
	for k, v := range fs {
		out[k] = v
	}
	out["blueprint.yaml"] += "    - name: extra\n      type: landscaper.gardener.cloud/mock\n      target: " + target +
		"\n      config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration}\n"
	return out
}

// forwardingTo is a blueprint with targetList and targetMap imports whose
// sub-installation "all" imports targetListRef ref.
func forwardingTo(ref string) map[string]string {
	return map[string]string{"blueprint.yaml": `imports:
- {name: clusters, type: targetList}
- {name: clustermap, type: targetMap}
subinstallations:
- name: all
  blueprint: {dir: all}
  imports:
    targets:
    - {name: also-my-targets, targetListRef: ` + ref + `}
    - {name: also-my-map, targetMapRef: clustermap}
`, "all/blueprint.yaml": forwardingBlueprint["all/blueprint.yaml"]}
}

// Bad target lists and maps fail the job, and lastError names the field and
// why: a deploy item's target.key or target.index that the import does not
// have, a Target of a list that does not exist, a map where the blueprint
// declares a list, targetListRef on a root, and a targetListRef naming no
// targetList import of the parent.
func TestBadTargetListsAndMapsFailNamingTheField(t *testing.T) {
	list := []lsv1alpha1.TargetImport{{Name: "clusters", Targets: []string{"c1", "c2"}}}
	both := []lsv1alpha1.TargetImport{{Name: "clusters", Targets: []string{"c1"}}, {Name: "clustermap", TargetMap: map[string]string{"blue": "c1"}}}
	for name, tc := range map[string]struct {
		fs      map[string]string
		targets []lsv1alpha1.TargetImport
		want    string // %s is the namespace
	}{
		"missing map key": {withExtraItem(targetMapBlueprint, "{import: clusters, key: purple}"),
			[]lsv1alpha1.TargetImport{{Name: "clusters", TargetMap: map[string]string{"blue": "c1", "red": "c2"}}},
			`TemplateFailed: execution "default" (blueprint.yaml): deploy item "extra": target.key "purple": targetMap import "clusters" has no such key (its keys: blue, red)`},
		"list index out of range": {withExtraItem(targetListBlueprint, "{import: clusters, index: 2}"), list,
			`TemplateFailed: execution "default" (blueprint.yaml): deploy item "extra": target.index 2: targetList import "clusters" has 2 targets (indexes 0 to 1)`},
		"list without index": {withExtraItem(targetListBlueprint, "{import: clusters}"), list,
			`deploy item "extra": target import "clusters" is a targetList: target.index says which of its 2 targets`},
		"list entry missing": {targetListBlueprint, []lsv1alpha1.TargetImport{{Name: "clusters", Targets: []string{"c1", "nosuch"}}},
			`ImportNotFound: target import "clusters": targets[1]: Target %s/nosuch does not exist`},
		"map given for a list": {targetListBlueprint, []lsv1alpha1.TargetImport{{Name: "clusters", TargetMap: map[string]string{"a": "c1"}}},
			`ImportInvalid: import "clusters": the blueprint declares a targetList import, but spec.imports.targets provides a targetMap (a targetList is given by targets or targetListRef)`},
		"targetListRef of a root": {targetListBlueprint, []lsv1alpha1.TargetImport{{Name: "clusters", TargetListReference: "up"}},
			`ImportInvalid: target import "clusters": targetListRef "up" names an import of the parent installation, and a root installation has none`},
		"targetListRef naming no list import": {forwardingTo("clustermap"), both,
			`TemplateFailed: subinstallation "all" imports targetList "clustermap", which is not a targetList import of this installation (its targetList imports are clusters)`},
	} {
		t.Run(name, func(t *testing.T) {
			ns, g := setup(t)
			createClusters(g, ns, "c1", "c2")
			create(g, &lsv1alpha1.DataObject{ObjectMeta: metaNS(ns, "config"), Data: lsv1alpha1.NewAnyJSON([]byte(`{"blue": {"color": "b"}, "red": {"color": "r"}}`))})
			inst := newInstallation(ns, "root", tc.fs, reconcileAnnotation...)
			inst.Spec.Imports.Targets = tc.targets
			if strings.Contains(tc.fs["blueprint.yaml"], "name: config") {
				inst.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "config", DataRef: "config"}}
			}
			create(g, inst)
			g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
			i, err := getInst(ns, "root")()
			g.Expect(err).NotTo(HaveOccurred())
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, ns)
			}
			g.Expect(lastError(i)).To(ContainSubstring(want))
		})
	}
}

// A target import takes exactly one of target, targets, targetListRef,
// targetMap and targetMapRef: the API server refuses any other at apply.
func TestTargetImportWithTwoSourcesIsRefusedAtApply(t *testing.T) {
	ns, g := setup(t)
	for _, ti := range []lsv1alpha1.TargetImport{
		{Name: "clusters", Target: "a", Targets: []string{"b"}},
		{Name: "clusters", TargetMap: map[string]string{"k": "a"}, TargetMapReference: "up"},
		{Name: "clusters"},
	} {
		inst := newInstallation(ns, "root", targetListBlueprint)
		inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{ti}
		err := env.Client.Create(context.Background(), inst)
		g.Expect(err).To(MatchError(ContainSubstring("a target import needs exactly one of target, targets, targetListRef, targetMap, targetMapRef")))
	}
}

// An empty targetList (targets: []) satisfies a required targetList import,
// as in Landscaper: the templates see an empty list, and a
// sub-installation given it by targetListRef gets an empty list too.
func TestEmptyTargetListIsAListOfNone(t *testing.T) {
	ns, g := setup(t)
	createClusters(g, ns, "blue")
	inst := newInstallation(ns, "root", forwardingBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{
		{Name: "clusters", Targets: []string{}},
		{Name: "clustermap", TargetMap: map[string]string{"b": "blue"}}}
	create(g, inst)
	succeeded(g, ns, "root")

	sub, err := getInst(ns, installation.SubInstallationName("root", "all"))()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.Spec.Imports.Targets).To(ContainElement(lsv1alpha1.TargetImport{Name: "also-my-targets", Targets: []string{}}))
	_, all := itemTargets(g, ns, installation.SubInstallationName("root", "all"))
	g.Expect(all).To(Equal(map[string]any{"map-b": "cluster blue"}))
}

// A target list that shrinks between jobs: the sub-installation of the
// dropped Target goes (uninstalling with the context copy it deployed to),
// then the copy goes too; deleting the root leaves no copy behind.
func TestShrunkTargetListDropsItsSubInstallationAndCopy(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	createClusters(g, ns, "red", "green")
	inst := newInstallation(ns, "root", forwardingBlueprint, reconcileAnnotation...)
	inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{
		{Name: "clusters", Targets: []string{"red", "green"}},
		{Name: "clustermap", TargetMap: map[string]string{"r": "red"}}}
	create(g, inst)
	succeeded(g, ns, "root")
	targets, _ := itemTargets(g, ns, installation.SubInstallationName("root", "one-1"))
	copyName := targets["item"]

	rerun(g, ns, "root", func(i *lsv1alpha1.Installation) { i.Spec.Imports.Targets[0].Targets = []string{"red"} })
	g.Expect(gone(getInst(ns, installation.SubInstallationName("root", "one-1")))()).To(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: copyName}, &lsv1alpha1.Target{})
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "the copy of clusters[1]")
	_, all := itemTargets(g, ns, installation.SubInstallationName("root", "all"))
	g.Expect(all).To(Equal(map[string]any{"list-0": "cluster red", "map-r": "cluster red"}))

	root, err := getInst(ns, "root")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	g.Eventually(gone(getInst(ns, "root")), timeout, interval).Should(BeTrue())
	g.Eventually(func() ([]lsv1alpha1.Target, error) {
		l := &lsv1alpha1.TargetList{}
		err := env.Client.List(ctx, l, client.InNamespace(ns), client.HasLabels{installation.ContextLabel})
		return l.Items, err
	}, timeout, interval).Should(BeEmpty())
}
