package manifest_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestMissingTargetSecret: a Target that exists but whose kubeconfig Secret
// does not fails the job with a reason of its own (TargetSecretNotFound, not
// TargetNotFound), ERR_CONFIGURATION_PROBLEM, and a message naming the
// Secret and how to retry. The deployer does not watch Secrets: once the
// Secret exists, operation: reconcile starts a job that succeeds.
func TestMissingTargetSecret(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "my-target", Namespace: ns},
		Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType,
			SecretRef: &lsv1alpha1.LocalSecretReference{Name: "my-target-kubeconfig"}},
	})).To(Succeed())
	di := item(ns, "app", "my-target", v2(`"manifests":[{"manifest":`+cm(ns, "app", map[string]string{"v": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonTargetSecretNotFound, lsv1alpha1.ErrorConfigurationProblem,
		"Target "+ns+"/my-target: spec.secretRef: Secret my-target-kubeconfig not found"))
	g.Expect(get(g, di)().Status.LastError.Message).To(ContainSubstring(lsv1alpha1.OperationAnnotation + ": " + string(lsv1alpha1.OperationReconcile)))

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-target-kubeconfig", Namespace: ns},
		Data: map[string][]byte{"kubeconfig": env.KubeConfig}})).To(Succeed())
	cur := get(g, di)()
	cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(),
		WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobID }, Not(Equal(cur.Status.JobID)))))
	g.Expect(configMap(g, ns, "app")()).To(Equal(map[string]string{"v": "1"}))
}

// targetForm is one way of writing a kubernetes-cluster Target, with the
// Secrets it needs.
type targetForm struct {
	name    string
	typ     string
	config  map[string]any
	ref     *lsv1alpha1.LocalSecretReference
	secrets map[string]map[string][]byte
}

// createForm creates the form's Secrets and Target (named after the form).
func createForm(g *WithT, ns string, f targetForm) {
	ctx := context.Background()
	for name, data := range f.secrets {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data})).To(Succeed(), f.name)
	}
	typ := f.typ
	if typ == "" {
		typ = lsv1alpha1.KubernetesClusterTargetType
	}
	tg := &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: f.name, Namespace: ns}, Spec: lsv1alpha1.TargetSpec{Type: typ, SecretRef: f.ref}}
	if f.config != nil {
		raw, err := json.Marshal(f.config)
		g.Expect(err).NotTo(HaveOccurred())
		cfg := lsv1alpha1.NewAnyJSON(raw)
		tg.Spec.Config = &cfg
	}
	g.Expect(env.Client.Create(ctx, tg)).To(Succeed(), f.name)
}

// TestTargetForms: each form of a kubernetes-cluster Target Landscaper
// documents reaches the cluster: the item applies its ConfigMap.
func TestTargetForms(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	kc := env.KubeConfig
	// Landscaper's form of a Secret key holding the whole configuration.
	whole, err := yaml.Marshal(map[string]string{"kubeconfig": string(kc)})
	g.Expect(err).NotTo(HaveOccurred())
	forms := []targetForm{
		{name: "inline", config: map[string]any{"kubeconfig": string(kc)}},
		{name: "short-type", typ: "kubernetes-cluster", config: map[string]any{"kubeconfig": string(kc)}},
		{name: "config-secretref", config: map[string]any{"kubeconfig": map[string]any{"secretRef": map[string]any{"name": "kc-a", "key": "cluster"}}},
			secrets: map[string]map[string][]byte{"kc-a": {"cluster": kc}}},
		{name: "config-secretref-own-namespace", config: map[string]any{"kubeconfig": map[string]any{"secretRef": map[string]any{"name": "kc-b", "namespace": ns}}},
			secrets: map[string]map[string][]byte{"kc-b": {"kubeconfig": kc}}},
		{name: "spec-secretref-data", ref: &lsv1alpha1.LocalSecretReference{Name: "kc-c"},
			secrets: map[string]map[string][]byte{"kc-c": {"kubeconfig": kc}}},
		{name: "spec-secretref-whole-config", ref: &lsv1alpha1.LocalSecretReference{Name: "kc-d", Key: "cluster1"},
			secrets: map[string]map[string][]byte{"kc-d": {"cluster1": whole}}},
		{name: "spec-secretref-kubeconfig-only", ref: &lsv1alpha1.LocalSecretReference{Name: "kc-e", Key: "kubeconfig"},
			secrets: map[string]map[string][]byte{"kc-e": {"kubeconfig": kc}}},
	}
	for _, f := range forms {
		createForm(g, ns, f)
		g.Expect(env.Client.Create(ctx, item(ns, f.name, f.name, v2(`"manifests":[{"manifest":`+cm(ns, f.name, map[string]string{"form": f.name})+`}]`)))).To(Succeed())
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Eventually(get(g, item(ns, f.name, "", "")), timeout, interval).Should(succeeded())
			g.Expect(configMap(g, ns, f.name)()).To(Equal(map[string]string{"form": f.name}))
		})
	}
}

// TestTargetBadInput: a Target that cannot be resolved fails its item with a
// lastError naming the Target, the field and why.
func TestTargetBadInput(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	kc := env.KubeConfig
	self := func(sa any) map[string]any {
		return map[string]any{"selfConfig": map[string]any{"serviceAccount": map[string]any{"name": sa}}}
	}
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})).To(Succeed())
	cases := []struct {
		form   targetForm
		reason string
		msg    string
	}{
		{targetForm{name: "config-secret-missing", config: map[string]any{"kubeconfig": map[string]any{"secretRef": map[string]any{"name": "nowhere"}}}},
			lib.ReasonTargetSecretNotFound, "Target " + ns + "/config-secret-missing: spec.config.kubeconfig.secretRef: Secret nowhere not found"},
		{targetForm{name: "config-key-missing", config: map[string]any{"kubeconfig": map[string]any{"secretRef": map[string]any{"name": "kc-a", "key": "other"}}},
			secrets: map[string]map[string][]byte{"kc-a": {"kubeconfig": kc}}},
			lib.ReasonInvalidConfig, "Target " + ns + `/config-key-missing: spec.config.kubeconfig.secretRef: Secret kc-a has no key "other"`},
		{targetForm{name: "config-other-namespace", config: map[string]any{"kubeconfig": map[string]any{"secretRef": map[string]any{"name": "kc-a", "namespace": "kube-system"}}}},
			lib.ReasonInvalidConfig, "Target " + ns + "/config-other-namespace: spec.config.kubeconfig.secretRef.namespace: Secret kube-system/kc-a is in another namespace than the Target"},
		{targetForm{name: "spec-key-missing", ref: &lsv1alpha1.LocalSecretReference{Name: "kc-b", Key: "cluster1"},
			secrets: map[string]map[string][]byte{"kc-b": {"kubeconfig": kc}}},
			lib.ReasonInvalidConfig, "Target " + ns + `/spec-key-missing: spec.secretRef: Secret kc-b has no key "cluster1"`},
		{targetForm{name: "self-unknown-sa", config: self("nobody")},
			lib.ReasonTargetServiceAccountNotFound, "Target " + ns + "/self-unknown-sa: spec.config.selfConfig.serviceAccount.name: ServiceAccount " + ns + "/nobody not found"},
		{targetForm{name: "self-no-sa", config: self("")},
			lib.ReasonInvalidConfig, "Target " + ns + "/self-no-sa: spec.config.selfConfig.serviceAccount.name must be set"},
		{targetForm{name: "self-too-short", config: map[string]any{"selfConfig": map[string]any{"serviceAccount": map[string]any{"name": "deployer"}, "expirationSeconds": 60}}},
			lib.ReasonTargetTokenRefused, "Target " + ns + "/self-too-short: spec.config.selfConfig: the API server refused a token for ServiceAccount " + ns + "/deployer (expirationSeconds 60)"},
		{targetForm{name: "self-and-kubeconfig", config: map[string]any{"kubeconfig": string(kc), "selfConfig": self("deployer")["selfConfig"]}},
			lib.ReasonInvalidConfig, "Target " + ns + "/self-and-kubeconfig: spec.config: kubeconfig and selfConfig are both set"},
		{targetForm{name: "empty-config", config: map[string]any{"other": "x"}},
			lib.ReasonInvalidConfig, "Target " + ns + "/empty-config: spec.config: kubeconfig or selfConfig must be set"},
	}
	for _, c := range cases {
		createForm(g, ns, c.form)
		g.Expect(env.Client.Create(ctx, item(ns, c.form.name, c.form.name, v2(`"manifests":[{"manifest":`+cm(ns, c.form.name, nil)+`}]`)))).To(Succeed())
	}
	for _, c := range cases {
		t.Run(c.form.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Eventually(get(g, item(ns, c.form.name, "", "")), timeout, interval).
				Should(failedWith(c.reason, lsv1alpha1.ErrorConfigurationProblem, c.msg))
		})
	}
}
