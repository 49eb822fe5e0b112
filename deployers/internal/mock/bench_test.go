package mock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

// BenchmarkMock100Items: 100 mock items created at once, until all are
// Succeeded — what the other controllers' tests and benchmarks pay per item.
func BenchmarkMock100Items(b *testing.B) {
	ns := testutil.Namespace(b, env)
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		items := make([]*lsv1alpha1.DeployItem, 100)
		start := time.Now()
		for j := range items {
			items[j] = item(ns, fmt.Sprintf("m%d-%d", i, j), "")
			if err := env.Client.Create(ctx, items[j]); err != nil {
				b.Fatal(err)
			}
		}
		for _, di := range items {
			for {
				cur := &lsv1alpha1.DeployItem{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur); err != nil {
					b.Fatal(err)
				}
				if cur.Status.Phase == lsv1alpha1.PhaseSucceeded && cur.Status.JobIDFinished == cur.Status.JobID && cur.Status.JobID != "" {
					break
				}
				if time.Since(start) > 5*time.Minute {
					b.Fatalf("%s not Succeeded within 5m", di.Name)
				}
				time.Sleep(10 * time.Millisecond) // polling of the measurement, not of the deployer
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N*100), "ms/item")
}
