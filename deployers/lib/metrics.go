package lib

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
	metrics.Registry.MustRegister(pickupLatency)
}

// tracer is looked up on every reconcile rather than once: the global
// provider may be installed (or replaced, in tests) after the deployer was
// built, and a tracer obtained earlier would keep the first provider.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// startSpan starts a child span of the reconcile span for one step.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer().Start(ctx, Kind+"."+name, trace.WithAttributes(attrs...))
}

// endSpan records err (if any) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// jobClock remembers when this process started each job, so a job's duration
// is exact (lastReconcileTime has a resolution of one second, and is the
// fallback after a restart).
type jobClock struct{ m sync.Map }

type jobStart struct {
	job string
	at  time.Time
}

func (c *jobClock) start(key types.NamespacedName, job string, at time.Time) {
	c.m.Store(key, jobStart{job: job, at: at})
}

// finish returns the duration of job (negative when its start is unknown)
// and forgets it.
func (c *jobClock) finish(key types.NamespacedName, job string, fallback time.Time, now time.Time) time.Duration {
	if v, ok := c.m.LoadAndDelete(key); ok {
		if st := v.(jobStart); st.job == job {
			return now.Sub(st.at)
		}
	}
	if fallback.IsZero() {
		return -1
	}
	return now.Sub(fallback)
}

func (c *jobClock) forget(key types.NamespacedName) { c.m.Delete(key) }
