package tracing

import (
	"context"
	"maps"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceContextAnnotation carries the W3C trace context of the job that last
// wrote an object; see the package documentation for its format.
const TraceContextAnnotation = "terrace.dev/trace-context"

// MaxAnnotationSize caps the annotation value in bytes. Beyond it the optional
// tracestate is dropped; the traceparent alone (55 bytes) always fits.
const MaxAnnotationSize = 512

// The propagator is used directly rather than through otel's global one: the
// annotation format is W3C by definition, whatever propagator a binary installs.
var w3c = propagation.TraceContext{}

// Inject returns annotations with the span context of ctx stored under
// TraceContextAnnotation.
//
// It returns annotations itself, unchanged, when tracing is disabled, when ctx
// carries no valid span context, or when the annotation already holds this
// value; so a caller that writes only when the map changed causes no API
// traffic for tracing's sake. Otherwise it returns a modified copy and never
// mutates the argument, which may belong to an object in the informer cache.
//
//	obj.SetAnnotations(tracing.Inject(ctx, obj.GetAnnotations()))
func Inject(ctx context.Context, annotations map[string]string) map[string]string {
	if !Enabled() {
		return annotations
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return annotations
	}
	value := encode(ctx)
	if value == "" {
		return annotations
	}
	if cur, ok := annotations[TraceContextAnnotation]; ok && cur == value {
		return annotations
	}
	out := make(map[string]string, len(annotations)+1)
	maps.Copy(out, annotations)
	out[TraceContextAnnotation] = value
	return out
}

// ContextToWrite returns the TraceContextAnnotation value that hands ctx's
// trace on to an object carrying annotations, and whether it has to be
// written: false while tracing is off, when ctx carries no span context, or
// when the object holds that value already.
func ContextToWrite(ctx context.Context, annotations map[string]string) (string, bool) {
	value, ok := Inject(ctx, annotations)[TraceContextAnnotation]
	if !ok || value == annotations[TraceContextAnnotation] {
		return "", false
	}
	return value, true
}

// AddToPatch returns set, the annotation changes of a metadata patch (a nil
// value removes one), plus the span context of ctx under
// TraceContextAnnotation when Inject would change annotations (the object's
// current ones); set itself otherwise. It never mutates set. A write the
// caller makes anyway (or makes only when set is not empty) then hands the
// object on to ctx's trace, and writes nothing for tracing's sake while
// tracing is off.
func AddToPatch(ctx context.Context, annotations map[string]string, set map[string]*string) map[string]*string {
	value, ok := ContextToWrite(ctx, annotations)
	if !ok {
		return set
	}
	out := make(map[string]*string, len(set)+1)
	maps.Copy(out, set)
	out[TraceContextAnnotation] = &value
	return out
}

// Extract returns ctx with the remote span context stored in annotations, so
// that spans started from it join the writer's trace. It returns ctx unchanged
// when the annotation is missing or malformed. Call it before starting the
// reconcile span.
func Extract(ctx context.Context, annotations map[string]string) context.Context {
	value, ok := annotations[TraceContextAnnotation]
	if !ok || value == "" {
		return ctx
	}
	traceparent, tracestate, _ := strings.Cut(value, ";")
	carrier := propagation.MapCarrier{"traceparent": strings.TrimSpace(traceparent)}
	if tracestate = strings.TrimSpace(tracestate); tracestate != "" {
		carrier["tracestate"] = tracestate
	}
	return w3c.Extract(ctx, carrier)
}

// encode renders the span context of ctx as "traceparent[;tracestate]",
// dropping the tracestate when the result would exceed MaxAnnotationSize.
func encode(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	value := carrier.Get("traceparent")
	if value == "" {
		return ""
	}
	if ts := carrier.Get("tracestate"); ts != "" && len(value)+1+len(ts) <= MaxAnnotationSize {
		value += ";" + ts
	}
	return value
}
