package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/terrace-dev/terrace/kit/tracing"
)

func TestConnectedAcrossAHandOver(t *testing.T) {
	rec := Record(t)
	tracer := otel.Tracer("test")
	ctx, root := tracer.Start(context.Background(), "root")
	annotations := tracing.InjectOnce(ctx, nil)
	if again := tracing.InjectOnce(context.Background(), annotations); again[tracing.TraceContextAnnotation] != annotations[tracing.TraceContextAnnotation] {
		t.Fatal("InjectOnce rewrote an existing trace context")
	}
	child := tracing.Extract(context.Background(), annotations)
	_, step := tracing.StartStep(child, tracer, "Thing", "Apply", attribute.String("k", "v"))
	tracing.EndStep(step, nil)
	root.End()

	if got := HandedOver(annotations); got.SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("handed over %v, want the root span", got)
	}
	spans := Trace(rec, root.SpanContext().TraceID())
	if len(spans) != 2 {
		t.Fatalf("want 2 spans, got %d", len(spans))
	}
	r, err := Connected(spans)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name() != "root" {
		t.Errorf("root = %s", r.Name())
	}
	for _, s := range spans {
		if s.Name() == "Thing.Apply" && Attr(s, "k") != "v" {
			t.Errorf("attribute k = %q", Attr(s, "k"))
		}
	}
	// Without the root, the step's parent is missing.
	if _, err := Connected(spans[:1]); err == nil {
		t.Error("a trace missing a parent passed as connected")
	}
}
