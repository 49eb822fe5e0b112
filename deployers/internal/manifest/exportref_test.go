package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestExportThroughObjectReference: fromObjectRef follows the reference at
// jsonPath (namespace: the holder's) and exports the value in the
// referenced object; a reference without a name fails the item.
func TestExportThroughObjectReference(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	sa := `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa","namespace":"` + ns + `"},"secrets":[{"name":"c"}]}`
	export := func(path string) string {
		return `"exports":{"exports":[{"key":"state","jsonPath":"` + path + `",
			"fromResource":{"apiVersion":"v1","kind":"ServiceAccount","name":"sa","namespace":"` + ns + `"},
			"fromObjectRef":{"apiVersion":"v1","kind":"ConfigMap","jsonPath":".data.state"}}]}`
	}
	di := item(ns, "ref", "t", v2(`"manifests":[{"manifest":`+sa+`},{"manifest":`+cm(ns, "c", map[string]string{"state": "up"})+`}],`+export(".secrets[0]")))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lib.ExportSecretName(di)}, s)).To(Succeed())
	g.Expect(string(s.Data["export"])).To(MatchJSON(`{"state":"up"}`))

	bad := item(ns, "bad-ref", "t", v2(`"manifests":[{"manifest":`+sa+`}],`+export(".metadata.name")))
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(get(g, bad), timeout, interval).Should(failedWith(manifest.ReasonExportFailed, lsv1alpha1.ErrorConfigurationProblem,
		"spec.config.exports.exports[0].jsonPath: the value at .metadata.name in ServiceAccount "+ns+"/sa (v1) is not an object reference with a name"))
}
