package installation_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// overwritesYAML is a ComponentVersionOverwrites object as a Landscaper
// user writes it: example.org/app 1.0.0 is read as 2.0.0.
const overwritesYAML = `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: ComponentVersionOverwrites
metadata:
  name: dev
overwrites:
- source:
    componentName: example.org/app
    version: 1.0.0
  substitution:
    version: 2.0.0
`

// An installation whose Context names a ComponentVersionOverwrites object
// gets the substituted component version: its blueprint and .cd are those
// of 2.0.0. A change of the object applies from the next job on.
func TestComponentVersionOverwritesSubstituteTheVersion(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	for _, version := range []string{"1.0.0", "2.0.0"} {
		push(t, base, componentSpec{name: "example.org/app", version: version,
			blueprints: map[string]map[string]string{"bp": simpleBlueprint(`      blueprintOf: "` + version + `"
      cd: "{{ .cd.component.version }}"`)}})
	}
	obj := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(overwritesYAML), &obj.Object)).To(Succeed())
	obj.SetNamespace(ns)
	create(g, obj)
	create(g, &lsv1alpha1.Context{ObjectMeta: metaNS(ns, "ocm"), RepositoryContext: ociContext(base), ComponentVersionOverwrites: "dev"})
	inst := componentInstallation(ns, "app", nil, "example.org/app", "1.0.0", "bp")
	inst.Spec.Context = "ocm"
	create(g, inst)

	g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "app")(); return lastError(i) })
	g.Expect(onlyItemConfig(g, ns, "app")).To(And(ContainSubstring(`"blueprintOf":"2.0.0"`), ContainSubstring(`"cd":"2.0.0"`)))

	// Without overwrites the next job reads the version spec names again.
	first, _ := getInst(ns, "app")()
	g.Expect(env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(`{"overwrites":[]}`)))).To(Succeed())
	annotate(g, first, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "app"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		HaveField("Status.JobID", Not(Equal(first.Status.JobID)))))
	g.Expect(onlyItemConfig(g, ns, "app")).To(And(ContainSubstring(`"blueprintOf":"1.0.0"`), ContainSubstring(`"cd":"1.0.0"`)))
}

// A Context naming a ComponentVersionOverwrites object that does not exist
// ends the job Failed, naming the object, its namespace and the Context;
// the job is not retried.
func TestComponentVersionOverwritesMissingFailsTheJob(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.Context{ObjectMeta: metaNS(ns, "ocm"), RepositoryContext: ociContext("127.0.0.1:1/ocm"), ComponentVersionOverwrites: "absent"})
	inst := componentInstallation(ns, "inst", nil, "example.org/app", "1.0.0", "bp")
	inst.Spec.Context = "ocm"
	create(g, inst)

	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	got, _ := getInst(ns, "inst")()
	g.Expect(lastError(got)).To(Equal(installation.ReasonOverwritesNotFound + ": ComponentVersionOverwrites " + ns +
		"/absent (componentVersionOverwrites of Context ocm) does not exist"))
	g.Consistently(getInst(ns, "inst"), "2s", interval).Should(HaveField("ResourceVersion", got.ResourceVersion), "a failed job is not retried")
}

// The API server refuses more than 256 overwrites in one object, naming
// the field and the bound.
func TestComponentVersionOverwritesAreBoundedAtApply(t *testing.T) {
	ns, g := setup(t)
	obj := &lsv1alpha1.ComponentVersionOverwrites{ObjectMeta: metaNS(ns, "many")}
	for range 257 {
		obj.Overwrites = append(obj.Overwrites, lsv1alpha1.ComponentVersionOverwrite{
			Source:       lsv1alpha1.ComponentVersionOverwriteReference{ComponentName: "example.org/app"},
			Substitution: lsv1alpha1.ComponentVersionOverwriteReference{Version: "2.0.0"},
		})
	}
	g.Expect(env.Client.Create(context.Background(), obj)).To(MatchError(ContainSubstring("overwrites: Too many: 257: must have at most 256 items")))
	obj.Overwrites = obj.Overwrites[:256]
	create(g, obj)
}
