package spacerequest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terrace-dev/terrace/kit/metrics"
)

// TracerName is the instrumentation scope of the spacerequest-stub's spans.
const TracerName = "github.com/terrace-dev/terrace/spacerequest-stub"

// Kind is the kind spans ("SpaceRequest.Reconcile", "SpaceRequest.<Step>")
// and the kind label of kit/metrics name.
const Kind = "SpaceRequest"

// tracer is looked up on every use rather than kept in a package variable,
// so that the tracer provider installed last (tracing.Setup, or
// tracing.Install in tests) is the one used.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// startSpan starts the child span "SpaceRequest.<step>" of the span in ctx.
func startSpan(ctx context.Context, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer().Start(ctx, Kind+"."+step, trace.WithAttributes(attrs...))
}

// endSpan records err, if any, on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// attrNamespace is the provisioned namespace on child spans (the standard
// k8s.namespace.name attribute is the SpaceRequest's own namespace).
const attrNamespace = attribute.Key("terrace.provisioned_namespace")

// ProvisioningDurationName is the name of the SpaceRequest provisioning
// duration histogram.
const ProvisioningDurationName = "terrace_spacerequest_provisioning_duration_seconds"

var provisioningDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name: ProvisioningDurationName,
	Help: "Time from a SpaceRequest's creation to the stub reporting it Ready (namespace, ServiceAccount, " +
		"RoleBinding and kubeconfig Secret in place). Observed once per SpaceRequest.",
	// 50ms … ~13.6m.
	Buckets: prometheus.ExponentialBuckets(0.05, 2, 15),
})

var registerOnce sync.Once

// registerMetrics registers the stub's metrics (and kit/metrics' shared
// ones) with controller-runtime's registry. It is idempotent.
func registerMetrics() {
	metrics.Register()
	registerOnce.Do(func() {
		if err := ctrlmetrics.Registry.Register(provisioningDuration); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	})
}

// phases records the SpaceRequests' per-object phase gauge and transitions
// (kit/metrics); a SpaceRequest's phase is its Ready condition's reason
// (Provisioning, Provisioned, Terminating, UnableToTerminate).
var phases = metrics.Recorder{Kind: Kind}

func observeProvisioned(created time.Time) {
	d := time.Since(created)
	if d < 0 {
		d = 0
	}
	provisioningDuration.Observe(d.Seconds())
}
