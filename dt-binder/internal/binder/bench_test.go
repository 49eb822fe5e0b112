package binder_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
)

// BenchmarkBind100Claims measures how long the binder takes to bind 100
// claims, created at once, against 100 pre-created free targets: from the
// first create to every claim Bound. Each iteration uses a fresh namespace,
// class and binder; setting them up is not timed.
//
//	go test ./binder -run '^$' -bench Bind100 -benchtime 3x
func BenchmarkBind100Claims(b *testing.B) {
	const n = 100
	ctx := context.Background()
	b.StopTimer()
	for range b.N {
		ns := newNamespace(b)
		class := newClass(b, appstudiov1alpha1.ReclaimPolicyDelete)
		for i := range n {
			create(b, newTarget(ns, "t"+strconv.Itoa(i), class.Name, ""))
		}
		startBinder(b, binder.Options{}, ns)
		b.StartTimer()

		claims := make([]client.Object, n)
		for i := range n {
			claims[i] = newClaim(ns, "c"+strconv.Itoa(i), class.Name, "")
		}
		createConcurrently(b, 16, claims...)
		NewWithT(b).Eventually(func(g Gomega) {
			var claims appstudiov1alpha1.DeploymentTargetClaimList
			g.Expect(env.Client.List(ctx, &claims, client.InNamespace(ns))).To(Succeed())
			bound := 0
			for _, c := range claims.Items {
				if c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
					bound++
				}
			}
			g.Expect(bound).To(Equal(n))
		}).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(Succeed())
		b.StopTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "claims/s")
}
