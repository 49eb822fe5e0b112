package sandbox

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// StartSpan starts the child span "<kind>.<step>" of the span in ctx.
func StartSpan(ctx context.Context, kind, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(ctx, kind+"."+step, trace.WithAttributes(attrs...))
}

// EndSpan records err, if any, on span and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Span attribute keys of the provisioner's child spans.
const (
	AttrSpaceRequest = attribute.Key("terrace.spacerequest")
	AttrTarget       = attribute.Key("terrace.target")
)
