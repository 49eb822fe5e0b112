package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/manifest"
)

// An item whose first apply failed recorded an empty list of managed objects
// (a providerStatus, but nothing in it): it installed nothing, so once its
// Target is gone its deletion still completes instead of failing for want of
// a Target it does not need.
func TestDeletionOfAnItemThatInstalledNothingNeedsNoTarget(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	target(g, ns, "t", nil)
	di := item(ns, "rejected", "t", v2(`"manifests":[{"manifest":`+cm(ns, "Bad_Name", nil)+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonRejected, lsv1alpha1.ErrorConfigurationProblem, "Bad_Name"))
	cur := get(g, di)()
	g.Expect(cur.Status.ProviderStatus).NotTo(BeNil(), "the failed apply recorded its (empty) list of managed objects")
	g.Expect(recorded(g, di)()).To(BeEmpty())

	g.Expect(env.Client.Delete(ctx, &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cur)).To(Succeed())
	g.Eventually(gone(g, cur), timeout, interval).Should(BeTrue(), "deleted without its Target: nothing was installed")
}
