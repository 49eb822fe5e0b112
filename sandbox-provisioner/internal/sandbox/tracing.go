package sandbox

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the sandbox-provisioner's spans.
const TracerName = "github.com/terrace-dev/terrace/sandbox-provisioner"

// Kinds, as span names use them ("<Kind>.Reconcile", "<Kind>.<Step>").
const (
	KindClaim        = "DeploymentTargetClaim"
	KindTarget       = "DeploymentTarget"
	KindSpaceRequest = "SpaceRequest"
)

// Tracer returns the sandbox-provisioner's tracer. It is looked up on every
// use rather than kept in a package variable, so that the tracer provider
// installed last (tracing.Setup, or tracing.Install in tests) is the one used.
// Child spans are tracing.StartStep's, named "<Kind>.<Step>".
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// Span attribute keys of the provisioner's child spans.
const (
	AttrSpaceRequest = attribute.Key("terrace.spacerequest")
	AttrTarget       = attribute.Key("terrace.target")
)
