// Package tracingtest helps tests check what a controller traces: it turns
// tracing on with an in-memory recorder and offers the questions the tests of
// every Terrace controller ask of a trace (its spans, whether the hand-overs
// kept every parent link, an attribute's value).
package tracingtest

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/terrace-dev/terrace/kit/tracing"
)

// Record turns tracing on (tracing.Install) with an in-memory recorder until
// tb ends. Tracing is process-global: tests that record must not run in
// parallel with tests that need tracing off.
func Record(tb testing.TB) *tracetest.SpanRecorder {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracing.Install(tp)
	tb.Cleanup(func() {
		tracing.Install(nil)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// HandedOver returns the span context stored in annotations
// (tracing.TraceContextAnnotation); invalid when there is none.
func HandedOver(annotations map[string]string) trace.SpanContext {
	return trace.SpanContextFromContext(tracing.Extract(context.Background(), annotations))
}

// Trace returns the ended spans of trace id.
func Trace(rec *tracetest.SpanRecorder, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// Connected returns the single root of spans, or an error naming the first
// span whose parent is not among spans or saying how many roots there are:
// the check that every hand-over kept its parent link.
func Connected(spans []sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, error) {
	ids := make(map[trace.SpanID]bool, len(spans))
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if !s.Parent().IsValid() {
			roots = append(roots, s)
			continue
		}
		if !ids[s.Parent().SpanID()] {
			return nil, fmt.Errorf("span %s (%s) has parent %s, which is not in the trace",
				s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID())
		}
	}
	if len(roots) != 1 {
		return nil, fmt.Errorf("want one root span, got %d", len(roots))
	}
	return roots[0], nil
}

// Attr returns the value of attribute key of s, "" when it has none.
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}
