package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

func managedBy(g *WithT, ns, name string) func() string {
	return func() string {
		c := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
		return c.Annotations[manifest.ManagedByAnnotation]
	}
}

// TestFallbackIsPerItem: the deployer's field manager is the same for every
// item, so fallback goes by the item that manages an object (its mark), not
// by the field manager. Item a manages ConfigMap "shared"; item b lists it
// with policy fallback and leaves it alone: b neither changes it nor deletes
// it when b is deleted. b's own fallback object is b's. An item with policy
// manage takes "shared" over (as in Landscaper); a, deleted then, leaves
// the object of the item that took it over.
func TestFallbackIsPerItem(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	a := item(ns, "a", "t", v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "shared", map[string]string{"v": "a"})+`}]`))
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(get(g, a), timeout, interval).Should(succeeded())

	b := item(ns, "b", "t", v2(`"manifests":[{"policy":"fallback","manifest":`+cm(ns, "shared", map[string]string{"v": "b"})+`},`+
		`{"policy":"fallback","manifest":`+cm(ns, "b-own", map[string]string{"v": "b"})+`}]`))
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(get(g, b), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}), "b does not take a's object")
	g.Expect(configMap(g, ns, "b-own")()).To(Equal(map[string]string{"v": "b"}))
	g.Expect(managedBy(g, ns, "shared")()).To(Equal(ns + "/a"))
	g.Expect(managedBy(g, ns, "b-own")()).To(Equal(ns + "/b"))
	// A re-apply of b (its own fallback object is updated) still leaves shared alone.
	g.Expect(testutil.Update(ctx, env.Client, get(g, b)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(v2(`"manifests":[{"policy":"fallback","manifest":` + cm(ns, "shared", map[string]string{"v": "b2"}) + `},` +
			`{"policy":"fallback","manifest":` + cm(ns, "b-own", map[string]string{"v": "b2"}) + `}]`))
	})).To(Succeed())
	g.Eventually(configMap(g, ns, "b-own"), timeout, interval).Should(Equal(map[string]string{"v": "b2"}))
	g.Eventually(get(g, b), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}))

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(gone(g, b), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "b-own")()).To(BeNil(), "b's own fallback object goes with b")
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "a"}), "a's object stays")
	g.Expect(recorded(g, a)()).To(ContainElement("ConfigMap " + ns + "/shared"))

	// manage takes over; the object is c's now, and a's deletion leaves it.
	c := item(ns, "c", "t", v2(`"manifests":[{"policy":"manage","manifest":`+cm(ns, "shared", map[string]string{"v": "c"})+`}]`))
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(get(g, c), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "c"}))
	g.Expect(managedBy(g, ns, "shared")()).To(Equal(ns + "/c"))
	g.Expect(env.Client.Delete(ctx, a)).To(Succeed())
	g.Eventually(gone(g, a), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "shared")()).To(Equal(map[string]string{"v": "c"}), "the object c took over stays")
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(gone(g, c), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "shared")()).To(BeNil())
}
