package controller_test

import (
	"fmt"
	"testing"
	"time"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// BenchmarkExecution50 measures an execution of 50 mock items from creation
// to Succeeded, with the execution controller and the test deployer of mock
// items in one process against the test API server:
//
//	go test ./internal/controller/ -run '^$' -bench Execution50 -benchtime 3x
func BenchmarkExecution50(b *testing.B) {
	for _, shape := range []string{"chain", "parallel"} {
		b.Run(shape, func(b *testing.B) {
			ns := newNamespace(b)
			startManager(b, ns, testOptions())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items := make([]lsv1alpha1.DeployItemTemplate, 50)
				for j := range items {
					var deps []string
					if shape == "chain" && j > 0 {
						deps = []string{fmt.Sprintf("i%02d", j-1)}
					}
					items[j] = mockItem(fmt.Sprintf("i%02d", j), mockv1alpha1.ProviderConfiguration{}, deps...)
				}
				exec := newExecution(ns, fmt.Sprintf("bench-%d", i), items...)
				start := time.Now()
				if err := env.Client.Create(ctx, exec); err != nil {
					b.Fatal(err)
				}
				done := waitFinishedWithin(b, exec, 5*time.Minute)
				if done.Status.Phase != lsv1alpha1.PhaseSucceeded {
					b.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.LastError)
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds())/50, "ms/item")
			}
		})
	}
}
