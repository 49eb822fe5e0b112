package helm_test

import (
	"context"
	"encoding/base64"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// TestOCIChartLifecycle installs a chart from an OCI registry into a
// namespace the release creates, upgrades it when the values change and
// uninstalls it when the item is deleted.
func TestOCIChartLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	relNS := ns + "-rel"
	target(g, ns)
	config := func(greet string) []byte {
		return providerConfig(map[string]any{
			"chart": map[string]string{"ref": pushChart(t)}, "name": "demo", "namespace": relNS, "createNamespace": true,
			"values":  map[string]string{"greeting": greet},
			"exports": map[string]any{"exports": []map[string]string{{"key": "greeting", "jsonPath": ".Values.greeting"}}},
		})
	}
	di := createItem(g, ns, "oci", config("hello"))

	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, relNS, "demo-cm")()).To(Equal("hello"))
	g.Expect(secretExists(relNS, "sh.helm.release.v1.demo.v1")).To(BeTrue(), "the release record of revision 1")
	got := get(g, di)()
	g.Expect(string(got.Status.ProviderStatus.Raw)).To(ContainSubstring(`"kind":"ConfigMap","name":"demo-cm","namespace":"` + relNS + `"`))
	export := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lib.ExportSecretName(di)}, export)).To(Succeed())
	g.Expect(string(export.Data["export"])).To(MatchJSON(`{"greeting":"hello"}`))

	// A job with unchanged chart and values leaves the release alone.
	firstJob := got.Status.JobID
	g.Expect(testutil.Update(ctx, env.Client, got, func(cur *lsv1alpha1.DeployItem) {
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		WithTransform(func(di *lsv1alpha1.DeployItem) string { return di.Status.JobID }, Not(Equal(firstJob)))))
	g.Expect(secretExists(relNS, "sh.helm.release.v1.demo.v2")).To(BeFalse(), "no new revision without a change")

	g.Expect(testutil.Update(ctx, env.Client, got, func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config = &runtime.RawExtension{Raw: config("bye")}
	})).To(Succeed())
	g.Eventually(greeting(g, relNS, "demo-cm"), timeout, interval).Should(Equal("bye"))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(secretExists(relNS, "sh.helm.release.v1.demo.v2")).To(BeTrue(), "the release record of revision 2")

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(greeting(g, relNS, "demo-cm"), timeout, interval).Should(BeEmpty())
	g.Eventually(func() bool { return secretExists(relNS, "sh.helm.release.v1.demo.v2") }, timeout, interval).Should(BeFalse())
}

// TestRawArchive installs a chart given inline as a base64 archive.
func TestRawArchive(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	di := createItem(g, ns, "raw", providerConfig(map[string]any{
		"chart": rawArchive(t), "name": "inline", "namespace": ns, "values": map[string]string{"greeting": "inline"},
	}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, ns, "inline-cm")()).To(Equal("inline"))
}

// TestBadConfiguration: each bad input ends the item Failed with a
// lastError that names the field and the reason.
func TestBadConfiguration(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	cases := []struct {
		name, reason, msg string
		fields            map[string]any
	}{
		{"resource-ref", helm.ReasonComponentResource, "spec.config.chart.resourceRef: the resource key is not unpadded base64url",
			map[string]any{"chart": map[string]string{"resourceRef": "chart"}}},
		{"from-resource", helm.ReasonComponentResource, "spec.config.chart.fromResource: one of ref or inline must be set",
			map[string]any{"chart": map[string]any{"fromResource": map[string]string{"resourceName": "chart"}}}},
		{"missing-chart", helm.ReasonChartPullFailed, "the registry has no such chart",
			map[string]any{"chart": map[string]string{"ref": registrytest.Start(t) + "/charts/nothing:1.0.0"}}},
		{"not-a-chart", helm.ReasonInvalidChart, "spec.config.chart.archive.raw: not a chart archive",
			map[string]any{"chart": map[string]any{"archive": map[string]string{"raw": "bm90IGEgY2hhcnQ="}}}},
		{"render-error", helm.ReasonRenderFailed, "templates/configmap.yaml:1",
			map[string]any{"chart": map[string]any{"archive": map[string]string{
				"raw": base64.StdEncoding.EncodeToString(chartArchiveWith(t, `{{ fail "greeting must be set" }}`))}}}},
		{"unknown-option", lib.ReasonInvalidConfig, "spec.config.helmDeploymentConfig.install.bogus: unknown option",
			map[string]any{"chart": rawArchive(t), "helmDeploymentConfig": map[string]any{"install": map[string]bool{"bogus": true}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.fields["name"], tc.fields["namespace"] = tc.name, ns
			di := createItem(g, ns, tc.name, providerConfig(tc.fields))
			g.Eventually(get(g, di), timeout, interval).Should(failedWith(tc.reason, tc.msg))
		})
	}
}

// TestContinuousReconcileRepairsDrift: an item with continuousReconcile is
// reconciled again on its schedule, and the upgrade that forced reconcile
// runs puts back an object of the release that was deleted on the target.
func TestContinuousReconcileRepairsDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	di := createItem(g, ns, "drift", providerConfig(map[string]any{
		"chart": rawArchive(t), "name": "drift", "namespace": ns, "values": map[string]string{"greeting": "steady"},
		"continuousReconcile": map[string]string{"every": "2s"},
	}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(greeting(g, ns, "drift-cm")()).To(Equal("steady"))

	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift-cm"}})).To(Succeed())
	g.Eventually(greeting(g, ns, "drift-cm"), timeout, interval).Should(Equal("steady"), "the scheduled reconcile upgrades the release")
	g.Expect(secretExists(ns, "sh.helm.release.v1.drift.v2")).To(BeTrue(), "the repair is a new revision")
}
