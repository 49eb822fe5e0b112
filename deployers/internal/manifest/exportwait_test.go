package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// An export whose source object does not exist yet (a Secret an operator
// generates) waits for it like for a missing value; before, the job failed
// at once with ERR_CONFIGURATION_PROBLEM.
func TestExportWaitsForItsSourceObject(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	exports := func(secret string) string {
		return `"exports":{"exports":[{"key":"password","jsonPath":".data.password","fromResource":{"apiVersion":"v1","kind":"Secret","name":"` + secret + `","namespace":"` + ns + `"}}]}`
	}
	di := item(ns, "late", "t", v2(`"manifests":[{"manifest":`+cm(ns, "c", nil)+`}],`+exports("generated")))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing),
		WithTransform(func(d *lsv1alpha1.DeployItem) []metav1.Condition { return d.Status.Conditions },
			ContainElement(HaveField("Message", ContainSubstring("Secret "+ns+"/generated (v1) does not exist on the target cluster yet"))))))
	g.Expect(get(g, di)().Status.LastError).To(BeNil())

	// The operator creates it: the item succeeds with the export.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "generated", Namespace: ns},
		Data: map[string][]byte{"password": []byte("s3cret")}})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(succeeded())
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late-export"}, sec)).To(Succeed())
	g.Expect(string(sec.Data[lib.ExportKey])).To(MatchJSON(`{"password":"czNjcmV0"}`))

	// One that never comes ends at the readiness timeout, naming it.
	never := item(ns, "never", "t", v2(`"manifests":[{"manifest":`+cm(ns, "d", nil)+`}],"readinessChecks":{"timeout":"2s"},`+exports("never-generated")))
	g.Expect(env.Client.Create(ctx, never)).To(Succeed())
	g.Eventually(get(g, never), timeout, interval).Should(failedWith(manifest.ReasonNotReady, lsv1alpha1.ErrorTimeout, "Secret "+ns+"/never-generated"))
}
