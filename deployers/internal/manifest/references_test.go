package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestReferenceWithoutNamespace: a readiness check or an export naming an
// object of a namespaced kind without its namespace fails the job at once
// (ERR_CONFIGURATION_PROBLEM, naming the reference) instead of waiting for
// an object nobody can find until the item's timeout. A cluster-scoped kind
// needs no namespace.
func TestReferenceWithoutNamespace(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	manifests := `"manifests":[{"manifest":` + cm(ns, "state", map[string]string{"state": "ready"}) + `},` +
		`{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `-scoped"}}}]`
	check := item(ns, "check", "t", v2(manifests+`,"readinessChecks":{"custom":[{"name":"state-ready",`+
		`"resourceSelector":[{"apiVersion":"v1","kind":"Namespace","name":"`+ns+`-scoped"},{"apiVersion":"v1","kind":"ConfigMap","name":"state"}],`+
		`"requirements":[{"jsonPath":".metadata.name","operator":"exists"}]}]}`))
	export := item(ns, "export", "t", v2(manifests+`,"exports":{"exports":[`+
		`{"key":"ns","jsonPath":".metadata.name","fromResource":{"apiVersion":"v1","kind":"Namespace","name":"`+ns+`-scoped"}},`+
		`{"key":"state","jsonPath":".data.state","fromResource":{"apiVersion":"v1","kind":"ConfigMap","name":"state"}}]}`))
	for _, di := range []*lsv1alpha1.DeployItem{check, export} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}
	// Well within the default timeout (10m): at once.
	g.Eventually(get(g, check), timeout, interval).Should(failedWith(manifest.ReasonReadinessInvalid, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.readinessChecks.custom[0].resourceSelector[1]: ConfigMap state (v1) is namespaced"))
	g.Eventually(get(g, export), timeout, interval).Should(failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.exports.exports[1].fromResource: ConfigMap state (v1) is namespaced"))
}
