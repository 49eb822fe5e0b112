package manifest_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

func configMapObject(g *WithT, ns, name string) func() *corev1.ConfigMap {
	return func() *corev1.ConfigMap {
		c := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c
	}
}

// TestObjectHooks: annotateBeforeCreate is on a created object and not on
// an existing one; patchAfterDeployment is applied after the apply;
// annotateBeforeDelete and patchBeforeDelete are on the object once its
// deletion starts (a finalizer keeps it visible), and recorded.
func TestObjectHooks(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "existing"}, Data: someData})).To(Succeed())
	hooks := `"annotateBeforeCreate":{"hooks.test/created":"yes"},"patchAfterDeployment":{"data":{"patched":"after"}},
		"annotateBeforeDelete":{"hooks.test/deleting":"yes"},"patchBeforeDelete":{"data":{"last":"words"}}`
	di := item(ns, "hooks", "t", v2(`"manifests":[{"manifest":`+heldCM(ns, "created")+`,`+hooks+`},
		{"manifest":`+cm(ns, "existing", someData)+`,"annotateBeforeCreate":{"hooks.test/created":"yes"}}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	created := configMapObject(g, ns, "created")()
	g.Expect(created.Annotations).To(HaveKeyWithValue("hooks.test/created", "yes"))
	g.Expect(created.Data).To(Equal(map[string]string{"k": "v", "patched": "after"}))
	g.Expect(configMapObject(g, ns, "existing")().Annotations).NotTo(HaveKey("hooks.test/created"), "an existing object is not created")
	var st manifestv1alpha2.ProviderStatus
	g.Expect(json.Unmarshal(get(g, di)().Status.ProviderStatus.Raw, &st)).To(Succeed())
	g.Expect(st.ManagedResources).To(ContainElement(And(
		HaveField("Resource.Name", "created"), HaveField("AnnotateBeforeDelete", HaveKeyWithValue("hooks.test/deleting", "yes")))))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(deleting(g, ns, "created"), timeout, interval).Should(BeTrue())
	deleted := configMapObject(g, ns, "created")()
	g.Expect(deleted.Annotations).To(HaveKeyWithValue("hooks.test/deleting", "yes"))
	g.Expect(deleted.Data).To(HaveKeyWithValue("last", "words"))
	release(g, ns, "created")
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
}

// TestObjectHooksKeepCreateAnnotations: a later apply keeps the
// annotations the object got on its creation.
func TestObjectHooksKeepCreateAnnotations(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "keep", "t", v2(`"manifests":[{"manifest":`+cm(ns, "kept", someData)+`,"annotateBeforeCreate":{"hooks.test/created":"yes"}}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	first := get(g, di)().Status.JobIDFinished

	cur := get(g, di)()
	cur.Spec.Config.Raw = []byte(v2(`"manifests":[{"manifest":` + cm(ns, "kept", map[string]string{"k": "w"}) + `,"annotateBeforeCreate":{"hooks.test/created":"yes"}}]`))
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(),
		WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobIDFinished }, Not(Equal(first)))))
	kept := configMapObject(g, ns, "kept")()
	g.Expect(kept.Data).To(HaveKeyWithValue("k", "w"))
	g.Expect(kept.Annotations).To(HaveKeyWithValue("hooks.test/created", "yes"))
}

// TestObjectHooksBadInput: a patch that is not a JSON object and an
// invalid annotation key fail the item, naming the field.
func TestObjectHooksBadInput(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	ok := `{"manifest":` + cm(ns, "ok", nil) + `}`
	cases := map[string]struct{ manifest, msg string }{
		"patch-array":    {`{"manifest":` + cm(ns, "a", nil) + `,"patchAfterDeployment":[1,2]}`, "spec.config.manifests[1].patchAfterDeployment: a merge patch must be a JSON object"},
		"patch-string":   {`{"manifest":` + cm(ns, "b", nil) + `,"patchBeforeDelete":"drop it"}`, "spec.config.manifests[1].patchBeforeDelete: a merge patch must be a JSON object"},
		"annotation-key": {`{"manifest":` + cm(ns, "c", nil) + `,"annotateBeforeDelete":{"not a key!":"x"}}`, "spec.config.manifests[1].annotateBeforeDelete"},
		"create-key":     {`{"manifest":` + cm(ns, "d", nil) + `,"annotateBeforeCreate":{"/x":"y"}}`, "spec.config.manifests[1].annotateBeforeCreate"},
	}
	for name, c := range cases {
		g.Expect(env.Client.Create(ctx, item(ns, name, "t", v2(`"manifests":[`+ok+`,`+c.manifest+`]`)))).To(Succeed(), name)
	}
	for name, c := range cases {
		g.Eventually(get(g, item(ns, name, "", "")), timeout, interval).Should(
			failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, c.msg), name)
	}
}
