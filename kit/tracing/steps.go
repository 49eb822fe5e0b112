package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// StartStep starts the child span "<kind>.<step>" of the span in ctx, for one
// step of a reconcile (a phase, a write, a call to another system). End it
// with EndStep.
func StartStep(ctx context.Context, tracer trace.Tracer, kind, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, kind+"."+step, trace.WithAttributes(attrs...))
}

// EndStep records err, if any, on span and ends it.
func EndStep(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// InjectOnce is Inject for objects whose trace is set once, by the write that
// hands them their work: it leaves annotations that already carry a trace
// context unchanged, so later reconciles (which continue that trace) never
// rewrite it.
func InjectOnce(ctx context.Context, annotations map[string]string) map[string]string {
	if _, ok := annotations[TraceContextAnnotation]; ok {
		return annotations
	}
	return Inject(ctx, annotations)
}
