package manifest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// waitSucceeded polls (directly against the API server) until every item is
// Succeeded with its job finished.
func waitSucceeded(b *testing.B, items []*lsv1alpha1.DeployItem) {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	pending := append([]*lsv1alpha1.DeployItem(nil), items...)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d items not Succeeded within 5m", len(pending))
		}
		next := pending[:0]
		for _, di := range pending {
			cur := &lsv1alpha1.DeployItem{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur); err != nil {
				b.Fatal(err)
			}
			if cur.Status.Phase == lsv1alpha1.PhaseFailed {
				b.Fatalf("%s failed: %+v", di.Name, cur.Status.LastError)
			}
			if cur.Status.Phase != lsv1alpha1.PhaseSucceeded || cur.Status.JobIDFinished == "" || cur.Status.JobIDFinished != cur.Status.JobID {
				next = append(next, di)
			}
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(10 * time.Millisecond) // polling interval of the measurement, not of the deployer
		}
	}
}

func benchItems(b *testing.B, n int) {
	ns, g := setup(b)
	target(g, ns, "t", nil)
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		items := make([]*lsv1alpha1.DeployItem, n)
		for j := range n {
			name := fmt.Sprintf("i%d-%d", i, j)
			items[j] = item(ns, name, "t", v2(`"manifests":[{"manifest":`+cm(ns, name, map[string]string{"k": "v"})+`}]`))
		}
		start := time.Now()
		for _, di := range items {
			if err := env.Client.Create(ctx, di); err != nil {
				b.Fatal(err)
			}
		}
		waitSucceeded(b, items)
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N*n), "ms/item")
}

// BenchmarkManifestItem: one manifest deploy item (one ConfigMap) from create
// to Succeeded, against the real API server.
func BenchmarkManifestItem(b *testing.B) { benchItems(b, 1) }

// BenchmarkManifest100Items: 100 items created at once, until all are Succeeded.
func BenchmarkManifest100Items(b *testing.B) { benchItems(b, 100) }
