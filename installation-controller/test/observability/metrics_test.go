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

const kind = "Installation"

// jobCounts reads the installations' jobs started, the jobs finished
// Succeeded and the Succeeded duration samples.
func jobCounts(g Gomega) map[string]float64 {
	return map[string]float64{
		"started":   observabilitytest.Counter(g, "terrace_jobs_started_total", map[string]string{"kind": kind}),
		"succeeded": observabilitytest.Counter(g, "terrace_jobs_finished_total", map[string]string{"kind": kind, "result": "Succeeded"}),
		"durations": float64(observabilitytest.HistogramCount(g, "terrace_job_duration_seconds", map[string]string{"kind": kind, "result": "Succeeded"})),
	}
}

// A job through a tree of three installations counts three jobs started and
// finished, times each; the per-object phase series show the final phase and
// go when the objects go.
func TestJobMetrics(t *testing.T) {
	tracing.Install(nil)
	ns := namespace(t)
	g := NewWithT(t)
	ctx := context.Background()

	before := jobCounts(g)
	g.Expect(env.Client.Create(ctx, newRoot(ns, "root", treeBlueprint("")))).To(Succeed())
	root := waitFinished(t, ns, "root", lsv1alpha1.PhaseSucceeded)

	want := map[string]float64{}
	for m, n := range before {
		want[m] = n + 3
	}
	g.Eventually(jobCounts).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))

	var series []any
	for _, n := range treeInstallations {
		series = append(series, fmt.Sprintf("Installation %s Succeeded", n))
	}
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(timeout).WithPolling(interval).
		Should(ConsistOf(series...))
	// The transitions into Succeeded are counted (at least this job's).
	g.Expect(observabilitytest.Counter(g, "terrace_phase_transitions_total", map[string]string{"kind": kind, "phase": "Succeeded"})).To(BeNumerically(">=", 3))
	// The shared metrics are registered with controller-runtime's registry.
	n, err := testutil.GatherAndCount(ctrlmetrics.Registry, "terrace_jobs_started_total", "terrace_jobs_finished_total",
		"terrace_job_duration_seconds", "terrace_phase_transitions_total", "terrace_object_phase")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 6))

	// Deleting the tree is a deletion job per installation; once everything
	// is gone, no per-object series of it is left.
	g.Expect(env.Client.Delete(ctx, root)).To(Succeed())
	waitGone(t, ns, "root")
	g.Eventually(func(g Gomega) []string { return observabilitytest.PhaseSeries(g, ns) }).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
	g.Expect(observabilitytest.Counter(g, "terrace_jobs_finished_total", map[string]string{"kind": kind, "result": "Deleted"})).To(BeNumerically(">=", 3))
}
