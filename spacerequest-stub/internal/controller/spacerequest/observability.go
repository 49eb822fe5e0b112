package spacerequest

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/terrace-dev/terrace/kit/metrics"
)

// TracerName is the instrumentation scope of the spacerequest-stub's spans.
const TracerName = "github.com/terrace-dev/terrace/spacerequest-stub"

// Kind is the kind spans ("SpaceRequest.Reconcile", "SpaceRequest.<Step>")
// and the kind label of kit/metrics name.
const Kind = "SpaceRequest"

// tracer is looked up on every use rather than kept in a package variable,
// so that the tracer provider installed last (tracing.Setup, or
// tracing.Install in tests) is the one used. Child spans are
// tracing.StartStep's: "SpaceRequest.<step>".
func tracer() trace.Tracer { return otel.Tracer(TracerName) }

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

// registerMetrics registers the stub's metrics (and kit/metrics' shared
// ones) with controller-runtime's registry. It is idempotent.
func registerMetrics() {
	metrics.Register()
	metrics.MustRegister(provisioningDuration)
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
