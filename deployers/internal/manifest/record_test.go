package manifest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

const holdFinalizer = "terrace.test/hold"

// reconfigure replaces the item's configuration (a new generation, a new job).
func reconfigure(g *WithT, di *lsv1alpha1.DeployItem, config string) {
	cur := get(g, di)()
	g.Expect(testutil.Update(context.Background(), env.Client, cur, func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config.Raw = []byte(config)
	})).To(Succeed())
}

// recorded is status.providerStatus.managedResources as "Kind namespace/name".
func recorded(g *WithT, di *lsv1alpha1.DeployItem) func() []string {
	return func() []string {
		cur := get(g, di)()
		if cur.Status.ProviderStatus == nil {
			return nil
		}
		var ps struct {
			ManagedResources []struct {
				Resource struct{ Kind, Name, Namespace string }
			} `json:"managedResources"`
		}
		g.Expect(json.Unmarshal(cur.Status.ProviderStatus.Raw, &ps)).To(Succeed())
		var out []string
		for _, r := range ps.ManagedResources {
			out = append(out, r.Resource.Kind+" "+r.Resource.Namespace+"/"+r.Resource.Name)
		}
		return out
	}
}

func release(g *WithT, ns, name string) {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := testutil.Update(context.Background(), env.Client, c, func(c *corev1.ConfigMap) { c.Finalizers = nil })
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
}

func namespaceDeleting(g *WithT, name string) func() bool {
	return func() bool {
		n := &corev1.Namespace{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
		return n.DeletionTimestamp != nil
	}
}

// Objects dropped from the configuration whose deletion is held by a
// finalizer keep the job Progressing and stay recorded; the next group (their
// namespace) is deleted once they are gone, and only then does the job
// succeed. Before, the job succeeded at once and forgot the namespace.
func TestRecordDroppedObjectsUntilDeleted(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	nsName := ns + "-drop"
	held := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held","namespace":"` + nsName + `","finalizers":["` + holdFinalizer + `"]}}`
	t.Cleanup(func() { release(NewWithT(t), nsName, "held") })
	di := item(ns, "drop", "t", v2(`"manifests":[{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+nsName+`"}}},{"manifest":`+held+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	reconfigure(g, di, v2(`"manifests":[{"manifest":`+cm(ns, "other", nil)+`}]`))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing), HaveField("Status.ObservedGeneration", int64(2)),
		WithTransform(func(d *lsv1alpha1.DeployItem) []metav1.Condition { return d.Status.Conditions },
			ContainElement(HaveField("Message", ContainSubstring("ConfigMap "+nsName+"/held"))))))
	g.Expect(recorded(g, di)()).To(ConsistOf("ConfigMap "+ns+"/other", "ConfigMap "+nsName+"/held", "Namespace /"+nsName))
	// The held config map is being deleted, its namespace waits for it.
	g.Consistently(func() bool {
		return get(g, di)().Status.Phase == lsv1alpha1.PhaseProgressing && !namespaceDeleting(g, nsName)()
	},
		2*time.Second, 100*time.Millisecond).Should(BeTrue())

	// Its controller lets it go: the namespace is deleted, the job ends.
	release(g, nsName, "held")
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(), HaveField("Status.ObservedGeneration", int64(2))))
	g.Expect(namespaceDeleting(g, nsName)()).To(BeTrue())
	g.Expect(configMap(g, nsName, "held")()).To(BeNil())
	// The namespace's deletion is the namespace controller's now (envtest has
	// none, so it stays Terminating).
	g.Expect(recorded(g, di)()).To(ConsistOf("ConfigMap " + ns + "/other"))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "other")()).To(BeNil())
}

// A deletion of dropped objects that never finishes ends the job at the
// item's timeout, naming what is held.
func TestRecordDroppedObjectsTimeout(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	nsName := ns + "-stuck"
	held := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held","namespace":"` + nsName + `","finalizers":["` + holdFinalizer + `"]}}`
	t.Cleanup(func() { release(NewWithT(t), nsName, "held") })
	di := item(ns, "stuck", "t", v2(`"manifests":[{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+nsName+`"}}},{"manifest":`+held+`}]`))
	d := lsv1alpha1.Duration("3s")
	di.Spec.Timeout = &d
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	reconfigure(g, di, v2(`"manifests":[]`))
	g.Eventually(get(g, di), timeout, interval).Should(And(HaveField("Status.ObservedGeneration", int64(2)),
		failedWith(manifest.ReasonDeleteFailed, lsv1alpha1.ErrorTimeout, "ConfigMap "+nsName+"/held")))
	g.Expect(recorded(g, di)()).To(ConsistOf("ConfigMap "+nsName+"/held", "Namespace /"+nsName))
	g.Expect(namespaceDeleting(g, nsName)()).To(BeFalse())
}

// A refused deletion of a dropped object keeps both the objects just applied
// and the one not deleted recorded, so deleting the item later removes them
// all. Before, only the old object stayed recorded and the new one leaked.
func TestRecordNewObjectsWhenDeletingDroppedFails(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	// An admission policy refuses to delete config maps labelled "protect"
	// in this test's namespace.
	pol := &admv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "protect-" + ns},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admv1.Fail),
			MatchConstraints: &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
				Operations: []admv1.OperationType{admv1.Delete},
				Rule:       admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}}}},
			Validations: []admv1.Validation{{Expression: `!(has(oldObject.metadata.labels) && 'protect' in oldObject.metadata.labels)`, Message: "protected"}},
		},
	}
	bind := &admv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "protect-" + ns},
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: pol.Name, ValidationActions: []admv1.ValidationAction{admv1.Deny},
			MatchResources: &admv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	g.Expect(env.Client.Create(ctx, pol)).To(Succeed())
	g.Expect(env.Client.Create(ctx, bind)).To(Succeed())
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), bind))
		_ = client.IgnoreNotFound(env.Client.Delete(context.Background(), pol))
	})
	// probe deletes a labelled config map of its own: it reports whether the
	// policy is in force (it takes a moment either way).
	probe := func() bool {
		p := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: map[string]string{"protect": "yes"}}}
		if err := env.Client.Create(ctx, p); err != nil {
			g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
		}
		return env.Client.Delete(ctx, p) != nil
	}
	g.Eventually(probe, timeout, interval).Should(BeTrue())

	protect := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"protect","namespace":"` + ns + `","labels":{"protect":"yes"}}}`
	di := item(ns, "replace", "t", v2(`"manifests":[{"manifest":`+protect+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	reconfigure(g, di, v2(`"manifests":[{"manifest":`+cm(ns, "brandnew", map[string]string{"k": "v"})+`}]`))
	g.Eventually(get(g, di), timeout, interval).Should(And(HaveField("Status.ObservedGeneration", int64(2)), phase(lsv1alpha1.PhaseFailed), finished(),
		WithTransform(func(d *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return d.Status.LastError },
			And(HaveField("Reason", manifest.ReasonRejected), HaveField("Message", ContainSubstring("ConfigMap "+ns+"/protect"))))))
	g.Expect(configMap(g, ns, "brandnew")()).To(Equal(map[string]string{"k": "v"}))
	g.Expect(recorded(g, di)()).To(ConsistOf("ConfigMap "+ns+"/brandnew", "ConfigMap "+ns+"/protect"))

	// Lifted, deleting the item removes both.
	g.Expect(env.Client.Delete(ctx, bind)).To(Succeed())
	g.Eventually(probe, timeout, interval).Should(BeFalse())
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(configMap(g, ns, "brandnew")()).To(BeNil(), "deleting the item deleted what the failed job had applied")
	g.Expect(configMap(g, ns, "protect")()).To(BeNil())
}
