package lib

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Job metrics, served on the binary's /metrics beside controller-runtime's.
var (
	jobsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_deployer_jobs_started_total",
		Help: "Jobs a deployer started on deploy items, by deployer and trigger.",
	}, []string{"deployer", "trigger"})
	jobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_deployer_jobs_finished_total",
		Help: "Jobs a deployer finished on deploy items, by deployer and final phase.",
	}, []string{"deployer", "phase"})
	jobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_deployer_job_duration_seconds",
		Help:    "Time from a job's start (lastReconcileTime) to its final phase, by deployer and phase.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16), // 10ms … ~5.5m
	}, []string{"deployer", "phase"})
)

func init() {
	metrics.Registry.MustRegister(jobsStarted, jobsFinished, jobDuration)
}
