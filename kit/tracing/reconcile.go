package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Span attribute keys every Terrace controller uses, so that a trace can be
// searched the same way whichever binary wrote a span.
const (
	AttrKind      = attribute.Key("terrace.kind")
	AttrNamespace = attribute.Key("k8s.namespace.name")
	AttrName      = attribute.Key("terrace.name")
	AttrJobID     = attribute.Key("terrace.job_id")
	AttrPhase     = attribute.Key("terrace.phase")
)

// Log keys carrying the current span's IDs, so a log line can be joined with
// its trace.
const (
	LogKeyTraceID = "traceID"
	LogKeySpanID  = "spanID"
)

// StartReconcile starts the span of one reconcile of obj, a kind object, in
// the trace handed over through obj's TraceContextAnnotation (a new trace when
// there is none), named "<kind>.Reconcile" and carrying the standard
// attributes; a reconcile outside any job (jobID "") carries no job ID
// attribute at all. When the span is recording, the logger in the returned context
// carries the trace and span IDs. End the span with EndReconcile.
//
// While tracing is off this returns a non-recording span and ctx's logger
// unchanged; it allocates little and writes nothing.
func StartReconcile(ctx context.Context, tracer trace.Tracer, kind string, obj client.Object, jobID string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx = Extract(ctx, obj.GetAnnotations())
	all := make([]attribute.KeyValue, 0, 4+len(attrs))
	all = append(all,
		AttrKind.String(kind),
		AttrNamespace.String(obj.GetNamespace()),
		AttrName.String(obj.GetName()),
	)
	if jobID != "" {
		all = append(all, AttrJobID.String(jobID))
	}
	all = append(all, attrs...)
	ctx, span := tracer.Start(ctx, kind+".Reconcile", trace.WithAttributes(all...))
	return WithSpanLogger(ctx), span
}

// WithSpanLogger returns ctx with its logger (controller-runtime's
// logf.FromContext) extended by the IDs of the span in ctx, when that span is
// recording.
func WithSpanLogger(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	log := logf.FromContext(ctx).WithValues(LogKeyTraceID, sc.TraceID().String(), LogKeySpanID, sc.SpanID().String())
	return logf.IntoContext(ctx, log)
}

// EndReconcile records the phase the object ended the reconcile in and the
// reconcile's error, if any, then ends the span.
func EndReconcile(span trace.Span, phase string, err error) {
	if phase != "" {
		span.SetAttributes(AttrPhase.String(phase))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
