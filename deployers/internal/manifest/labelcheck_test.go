package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
)

// TestLabelSelectorReadinessCheck: a custom check by labels waits while no
// object matches and while one does not meet the requirements; a selector
// without labels fails the item.
func TestLabelSelectorReadinessCheck(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	check := func(labels string) string {
		return `"readinessChecks":{"custom":[{"name":"tier","labelSelector":{"apiVersion":"v1","kind":"ConfigMap","matchLabels":` + labels + `},
			"requirements":[{"jsonPath":".data.state","operator":"==","values":["up"]}]}]}`
	}
	di := item(ns, "labels", "t", v2(`"manifests":[{"manifest":`+cm(ns, "own", someData)+`}],`+check(`{"tier":"`+ns+`"}`)))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing),
		HaveField("Status.Conditions", ContainElement(HaveField("Message", ContainSubstring(`custom readiness check "tier": no ConfigMap (v1) with labels tier=`+ns+" yet"))))))
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", Labels: map[string]string{"tier": ns}}, Data: map[string]string{"state": "down"}}
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(HaveField("Status.Conditions",
		ContainElement(HaveField("Message", ContainSubstring(`custom readiness check "tier": ConfigMap `+ns+"/other (v1): .data.state == [up] not met")))))
	other.Data["state"] = "up"
	g.Expect(env.Client.Update(ctx, other)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())

	bad := item(ns, "no-labels", "t", v2(`"manifests":[],`+check(`{}`)))
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(get(g, bad), timeout, interval).Should(failedWith(manifest.ReasonReadinessInvalid, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.readinessChecks.custom[0].labelSelector: apiVersion, kind and matchLabels must be set"))
}
