package observability_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
	"github.com/terrace-dev/terrace/kit/tracing"
)

var kinds = []string{"Installation", "Execution", "DeployItem"}

// jobCounts reads, per kind, the jobs started, the jobs finished Succeeded
// and the Succeeded duration samples, and the mock deployer's pickups.
func jobCounts(g Gomega) map[string]float64 {
	out := map[string]float64{}
	for _, k := range kinds {
		out[k+" started"] = observabilitytest.Counter(g, "terrace_jobs_started_total", map[string]string{"kind": k})
		out[k+" succeeded"] = observabilitytest.Counter(g, "terrace_jobs_finished_total", map[string]string{"kind": k, "result": "Succeeded"})
		out[k+" durations"] = float64(observabilitytest.HistogramCount(g, "terrace_job_duration_seconds", map[string]string{"kind": k, "result": "Succeeded"}))
	}
	out["pickups"] = float64(observabilitytest.HistogramCount(g, "terrace_deployitem_pickup_latency_seconds", map[string]string{"deployer": "mock-deployer"}))
	return out
}

// A job through a tree of three installations, three executions and three
// deploy items counts three jobs started and finished per kind, times each,
// measures three pickups; the per-object phase series show the final phase
// and go when the objects go.
func TestJobMetrics(t *testing.T) {
	tracing.Install(nil)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()

	before := jobCounts(g)
	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	root := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)

	want := map[string]float64{"pickups": before["pickups"] + 3}
	for _, k := range kinds {
		for _, m := range []string{" started", " succeeded", " durations"} {
			want[k+m] = before[k+m] + 3
		}
	}
	g.Eventually(jobCounts).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))

	var series []any
	for _, n := range treeInstallations {
		series = append(series, fmt.Sprintf("Installation %s Succeeded", n))
	}
	for _, n := range treeExecutions {
		series = append(series, fmt.Sprintf("Execution %s Succeeded", n))
	}
	for _, n := range treeItems {
		series = append(series, fmt.Sprintf("DeployItem %s Succeeded", n))
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(timeout).WithPolling(interval).
		Should(ConsistOf(series...))
	// Every kind counted its transitions into Succeeded (at least this job's).
	for _, k := range kinds {
		g.Expect(observabilitytest.Counter(g, "terrace_phase_transitions_total", map[string]string{"kind": k, "phase": "Succeeded"})).To(BeNumerically(">=", 3), k)
	}
	// The shared metrics are registered with controller-runtime's registry.
	n, err := testutil.GatherAndCount(ctrlmetrics.Registry, "terrace_jobs_started_total", "terrace_jobs_finished_total",
		"terrace_job_duration_seconds", "terrace_phase_transitions_total", "terrace_object_phase", "terrace_deployitem_pickup_latency_seconds")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 6))

	// Deleting the tree is a deletion job per installation and execution;
	// once everything is gone, no per-object series of it is left.
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	waitGone(t, ns, "root")
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
	g.Expect(observabilitytest.Counter(g, "terrace_jobs_finished_total", map[string]string{"kind": "Installation", "result": "Deleted"})).To(BeNumerically(">=", 3))
	g.Expect(observabilitytest.Counter(g, "terrace_jobs_finished_total", map[string]string{"kind": "Execution", "result": "Deleted"})).To(BeNumerically(">=", 3))
}
