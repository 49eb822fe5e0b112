package lib

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/terrace-dev/terrace/kit/metrics"
)

// Kind is the object kind in span names ("DeployItem.Reconcile",
// "DeployItem.Apply", …), span attributes and the shared metrics' kind label
// (package kit/metrics: terrace_jobs_started_total, terrace_jobs_finished_total,
// terrace_job_duration_seconds, terrace_phase_transitions_total,
// terrace_object_phase).
const Kind = "DeployItem"

// TracerName names the tracer of the library.
const TracerName = "github.com/terrace-dev/terrace/deployers/lib"

// AttrDeployer is the span attribute naming the deployer.
const AttrDeployer = attribute.Key("deployer")

// LabelDeployer is the deployer label of the deployer's own metrics. Its
// values are the deployers' names (a handful per cluster).
const LabelDeployer = "deployer"

// pickupLatency is the time from the execution controller handing a job to a
// deploy item (the reconcile-time stamp) to the deployer starting it.
var pickupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "terrace_deployitem_pickup_latency_seconds",
	Help:    "Time from an execution handing a job to a deploy item (its reconcile-time annotation) to the deployer starting the job, by deployer.",
	Buckets: prometheus.ExponentialBuckets(0.005, 2, 17), // 5ms … ~5.5m (the default pickup timeout is 5m)
}, []string{LabelDeployer})

func init() {
	metrics.MustRegister(pickupLatency)
}

// tracer is looked up on every reconcile rather than once: the global
// provider may be installed (or replaced, in tests) after the deployer was
// built, and a tracer obtained earlier would keep the first provider.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }
