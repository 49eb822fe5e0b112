package manifest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

// someData makes configMap tell an existing ConfigMap from a missing one.
var someData = map[string]string{"k": "v"}

// heldCM is a ConfigMap manifest that a finalizer holds once deleted.
func heldCM(ns, name string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "finalizers": []string{holdFinalizer}}, "data": someData})
	return string(b)
}

func deleting(g *WithT, ns, name string) func() bool {
	return func() bool {
		c := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c.DeletionTimestamp != nil
	}
}

// TestDeletionGroupsOrderTheDeletion: the second group waits until the
// object of the first is gone.
func TestDeletionGroupsOrderTheDeletion(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "ordered", "t", v2(`"manifests":[{"manifest":`+cm(ns, "second", someData)+`},{"manifest":`+heldCM(ns, "first")+`}],
		"deletionGroups":[{"customResourceGroup":{"resources":[{"apiVersion":"v1","kind":"configmaps","names":["first"]}]}},
		{"predefinedResourceGroup":{"type":"namespaced-resources"}}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(deleting(g, ns, "first"), timeout, interval).Should(BeTrue())
	g.Consistently(configMap(g, ns, "second"), 2*time.Second, interval).ShouldNot(BeNil(), "the second group waits for the first")
	release(g, ns, "first")
	g.Eventually(configMap(g, ns, "second"), timeout, interval).Should(BeNil())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}

// TestDeletionGroupsSelectWhatIsDeleted: the empty group deletes nothing;
// forceDelete removes finalizers; deleteAllResources deletes objects the
// item did not apply.
func TestDeletionGroupsSelectWhatIsDeleted(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)

	kept := item(ns, "kept", "t", v2(`"manifests":[{"manifest":`+cm(ns, "kept", someData)+`}],
		"deletionGroups":[{"predefinedResourceGroup":{"type":"empty"}}]`))
	forced := item(ns, "forced", "t", v2(`"manifests":[{"manifest":`+heldCM(ns, "forced")+`}],
		"deletionGroups":[{"predefinedResourceGroup":{"type":"namespaced-resources","forceDelete":true}}]`))
	all := item(ns, "all", "t", v2(`"manifests":[{"manifest":`+cm(ns, "all", someData)+`}],
		"deletionGroups":[{"customResourceGroup":{"deleteAllResources":true,"resources":[{"apiVersion":"v1","kind":"ConfigMap","names":["all","stray"],"namespaces":["`+ns+`"]}]}}]`))
	for _, di := range []client.Object{kept, forced, all} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray"}, Data: someData})).To(Succeed())
	for _, di := range []*lsv1alpha1.DeployItem{kept, forced, all} {
		g.Eventually(get(g, di), timeout, interval).Should(succeeded())
		g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
		g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	}
	g.Expect(configMap(g, ns, "kept")()).NotTo(BeNil(), "the empty group deletes nothing")
	g.Expect(configMap(g, ns, "forced")()).To(BeNil(), "forceDelete removed the finalizer")
	g.Expect(configMap(g, ns, "all")()).To(BeNil())
	g.Expect(configMap(g, ns, "stray")()).To(BeNil(), "deleteAllResources deletes objects the item did not apply")
}

// TestDeletionGroupsDuringUpdate: of the objects that left the
// configuration, only those a group selects are deleted; the others are
// left on the target and no longer recorded.
func TestDeletionGroupsDuringUpdate(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "upd", "t", v2(`"manifests":[{"manifest":`+cm(ns, "a", someData)+`},{"manifest":`+cm(ns, "b", someData)+`},{"manifest":`+cm(ns, "c", someData)+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	g.Expect(testutil.Update(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(v2(`"manifests":[{"manifest":` + cm(ns, "c", someData) + `}],
			"deletionGroupsDuringUpdate":[{"customResourceGroup":{"resources":[{"apiVersion":"v1","kind":"ConfigMap","names":["a"]}]}}]`))
	})).To(Succeed())
	g.Eventually(configMap(g, ns, "a"), timeout, interval).Should(BeNil())
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(), HaveField("Generation", BeNumerically("==", 2)),
		HaveField("Status.ObservedGeneration", BeNumerically("==", 2))))
	g.Expect(configMap(g, ns, "b")()).NotTo(BeNil(), "no group selects b")
	ps := string(get(g, di)().Status.ProviderStatus.Raw)
	g.Expect(ps).To(ContainSubstring(`"name":"c"`))
	g.Expect(ps).NotTo(ContainSubstring(`"name":"b"`))
}

// TestBadDeletionGroups: malformed groups fail the item before anything is
// applied, naming the field.
func TestBadDeletionGroups(t *testing.T) {
	ns, g := setup(t)
	target(g, ns, "t", nil)
	cases := map[string]struct{ groups, msg string }{
		"type": {`"deletionGroups":[{"predefinedResourceGroup":{"type":"pods"}}]`,
			`spec.config.deletionGroups[0].predefinedResourceGroup.type: "pods" is not one of namespaced-resources`},
		"both": {`"deletionGroupsDuringUpdate":[{"predefinedResourceGroup":{"type":"crds"},"customResourceGroup":{}}]`,
			"spec.config.deletionGroupsDuringUpdate[0]: set exactly one of predefinedResourceGroup and customResourceGroup"},
		"kind": {`"deletionGroups":[{"customResourceGroup":{"resources":[{"apiVersion":"v1"}]}}]`,
			"spec.config.deletionGroups[0].customResourceGroup.resources[0]: apiVersion and kind must be set"},
	}
	for name, tc := range cases {
		di := item(ns, name, "t", v2(`"manifests":[{"manifest":`+cm(ns, "bad-"+name, someData)+`}],`+tc.groups))
		g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonDeletionGroupInvalid, lsv1alpha1.ErrorConfigurationProblem, tc.msg))
		g.Expect(configMap(g, ns, "bad-"+name)()).To(BeNil(), "nothing applied")
	}
}
