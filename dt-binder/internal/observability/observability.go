// Package observability holds the dt-binder's tracing and metric helpers: the
// tracer, the kinds its spans and per-object metrics name, links to other
// objects' traces, and the claim bind latency histogram.
//
// Tracing is kit/tracing's: every reconcile is a "<Kind>.Reconcile" span
// (tracing.StartReconcile) that continues the trace handed over in the
// object's terrace.dev/trace-context annotation, with a "<Kind>.<Step>" child
// span per write (tracing.StartStep). The binder hands a claim's trace over
// only in writes it makes anyway (tracing.InjectOnce): the first metadata
// write on a claim (its finalizer, or the dt-provisioner mark) starts the
// claim's trace for every controller that follows, and later reconciles never
// rewrite it. Metrics are registered with controller-runtime's registry, so
// they are served on the binary's /metrics.
package observability

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// TracerName is the instrumentation scope of the dt-binder's spans.
const TracerName = "github.com/terrace-dev/terrace/dt-binder"

// Kinds, as span names ("<Kind>.Reconcile", "<Kind>.<Step>") and the kind
// label of kit/metrics use them.
const (
	KindClaim  = "DeploymentTargetClaim"
	KindTarget = "DeploymentTarget"
)

// Tracer returns the dt-binder's tracer. It is looked up on every use rather
// than kept in a package variable, so that a tracer provider installed later
// (tracing.Install in tests, or again after Install(nil)) is always the one used.
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// LinkTo adds to the span in ctx a link to the trace context handed over in
// annotations (another object's), when there is one and tracing is on.
func LinkTo(ctx context.Context, annotations map[string]string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), annotations))
	if sc.IsValid() && !sc.Equal(span.SpanContext()) {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// Bind modes, the values of the mode label of terrace_claim_bind_duration_seconds.
const (
	// ModeStatic: the claim was bound to an existing target (by
	// spec.targetName, a pre-set claimRef, or best match).
	ModeStatic = "static"
	// ModeDynamic: the claim was marked for dynamic provisioning and bound to
	// the target its provisioner created.
	ModeDynamic = "dynamic"
)

// BindDurationName is the name of the claim bind latency histogram.
const BindDurationName = "terrace_claim_bind_duration_seconds"

var bindDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: BindDurationName,
	Help: "Time from a DeploymentTargetClaim's creation to the binder binding it (phase Bound), " +
		"by mode (static: an existing target; dynamic: a provisioned one). Observed once per claim.",
	// 50ms … ~13.6m: static binds take well under a second, dynamic
	// provisioning seconds to minutes.
	Buckets: prometheus.ExponentialBuckets(0.05, 2, 15),
}, []string{"mode"})

// RegisterMetrics registers the dt-binder's metrics (and kit/metrics' shared
// ones) with controller-runtime's registry. It is idempotent.
func RegisterMetrics() {
	metrics.Register()
	metrics.MustRegister(bindDuration)
	// Both modes' series exist from the start (empty): a freshly
	// (re)started binder shows the histogram before its first bind.
	bindDuration.WithLabelValues(ModeStatic)
	bindDuration.WithLabelValues(ModeDynamic)
}

// Claims and Targets record phase transitions and the per-object phase gauge
// (kit/metrics) of claims and targets; the binder owns both phases.
var (
	Claims  = metrics.Recorder{Kind: KindClaim}
	Targets = metrics.Recorder{Kind: KindTarget}
)

// ObserveBind observes the bind latency of a claim created at created.
func ObserveBind(mode string, created time.Time) {
	d := time.Since(created)
	if d < 0 {
		d = 0
	}
	bindDuration.WithLabelValues(mode).Observe(d.Seconds())
}
