package tracing

import (
	"context"
	"reflect"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// installRecorder turns tracing on with an in-memory provider for one test.
func installRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	Install(tp)
	t.Cleanup(func() {
		Install(nil)
		_ = tp.Shutdown(context.Background())
	})
	return tp, rec
}

// remoteContext returns a context carrying a fixed, valid span context.
func remoteContext(t *testing.T, tracestate string) context.Context {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState(tracestate)
	if err != nil {
		t.Fatalf("bad tracestate %q: %v", tracestate, err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

func samePointer(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestInjectDisabledLeavesAnnotationsAlone(t *testing.T) {
	Install(nil)
	ctx := remoteContext(t, "")

	in := map[string]string{"a": "b"}
	out := Inject(ctx, in)
	if !samePointer(in, out) || !reflect.DeepEqual(out, map[string]string{"a": "b"}) {
		t.Fatalf("Inject with tracing disabled changed the annotations: %v", out)
	}
	if got := Inject(ctx, nil); got != nil {
		t.Fatalf("Inject with tracing disabled allocated annotations: %v", got)
	}
}

func TestInjectWithoutSpanLeavesAnnotationsAlone(t *testing.T) {
	installRecorder(t)
	in := map[string]string{"a": "b"}
	if out := Inject(context.Background(), in); !samePointer(in, out) || len(out) != 1 {
		t.Fatalf("Inject without a span changed the annotations: %v", out)
	}
}

func TestInjectExtractRoundTrip(t *testing.T) {
	tp, rec := installRecorder(t)
	tracer := tp.Tracer("test")

	writerCtx, writer := tracer.Start(context.Background(), "writer")
	in := map[string]string{"keep": "me"}
	annotations := Inject(writerCtx, in)
	writer.End()

	if _, ok := in[TraceContextAnnotation]; ok {
		t.Fatal("Inject mutated its argument")
	}
	if annotations["keep"] != "me" {
		t.Fatalf("Inject dropped other annotations: %v", annotations)
	}
	value := annotations[TraceContextAnnotation]
	if !strings.HasPrefix(value, "00-"+writer.SpanContext().TraceID().String()+"-") {
		t.Fatalf("annotation %q does not carry the writer's trace", value)
	}

	// Injecting the same context again needs no write.
	if again := Inject(writerCtx, annotations); !samePointer(again, annotations) {
		t.Fatal("Inject copied annotations that already held the same value")
	}

	readerCtx := Extract(context.Background(), annotations)
	_, reader := tracer.Start(readerCtx, "reader")
	reader.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("recorded %d spans, want 2", len(spans))
	}
	got := spans[1]
	if got.Name() != "reader" {
		t.Fatalf("second span is %q, want reader", got.Name())
	}
	if got.SpanContext().TraceID() != writer.SpanContext().TraceID() {
		t.Errorf("reader trace ID %s, want %s", got.SpanContext().TraceID(), writer.SpanContext().TraceID())
	}
	if got.Parent().SpanID() != writer.SpanContext().SpanID() {
		t.Errorf("reader parent span ID %s, want %s", got.Parent().SpanID(), writer.SpanContext().SpanID())
	}
	if !got.Parent().IsRemote() {
		t.Error("reader parent is not marked remote")
	}
}

func TestTraceStateRoundTrip(t *testing.T) {
	installRecorder(t)
	annotations := Inject(remoteContext(t, "vendor=a;b,other=c"), nil)

	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=a;b,other=c"
	if got := annotations[TraceContextAnnotation]; got != want {
		t.Fatalf("annotation = %q, want %q", got, want)
	}
	sc := trace.SpanContextFromContext(Extract(context.Background(), annotations))
	if got := sc.TraceState().String(); got != "vendor=a;b,other=c" {
		t.Errorf("extracted tracestate %q", got)
	}
	if got := sc.SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("extracted span ID %q", got)
	}
}

func TestInjectDropsOversizedTraceState(t *testing.T) {
	installRecorder(t)
	long := strings.Repeat("x", 200)
	ctx := remoteContext(t, "a="+long+",b="+long+",c="+long)

	value := Inject(ctx, nil)[TraceContextAnnotation]
	if value != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("annotation = %q, want the traceparent alone", value)
	}

	// A tracestate that fits is kept.
	ctx = remoteContext(t, "a="+long)
	if value := Inject(ctx, nil)[TraceContextAnnotation]; !strings.HasSuffix(value, ";a="+long) || len(value) > MaxAnnotationSize {
		t.Fatalf("annotation = %q, want traceparent;tracestate", value)
	}
}

func TestExtractIgnoresBadAnnotations(t *testing.T) {
	for _, annotations := range []map[string]string{
		nil,
		{},
		{TraceContextAnnotation: ""},
		{TraceContextAnnotation: "not-a-traceparent"},
		{TraceContextAnnotation: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
	} {
		ctx := Extract(context.Background(), annotations)
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("Extract(%v) produced a valid span context", annotations)
		}
	}
}

func TestAddToPatch(t *testing.T) {
	v := "x"
	set := map[string]*string{"keep": &v, "remove": nil}

	Install(nil)
	if got := AddToPatch(remoteContext(t, ""), nil, set); !reflect.DeepEqual(got, set) {
		t.Fatalf("tracing off: want set unchanged, got %v", got)
	}

	installRecorder(t)
	ctx := remoteContext(t, "")
	got := AddToPatch(ctx, map[string]string{"other": "y"}, set)
	want := Inject(ctx, nil)[TraceContextAnnotation]
	if len(got) != 3 || *got["keep"] != "x" || got["remove"] != nil || got[TraceContextAnnotation] == nil || *got[TraceContextAnnotation] != want {
		t.Fatalf("want set plus the trace context %q, got %v", want, got)
	}
	if len(set) != 2 {
		t.Fatalf("set was modified: %v", set)
	}
	if v, ok := ContextToWrite(ctx, nil); !ok || v != want {
		t.Fatalf("ContextToWrite: want %q, true; got %q, %v", want, v, ok)
	}
	if _, ok := ContextToWrite(ctx, map[string]string{TraceContextAnnotation: want}); ok {
		t.Fatalf("ContextToWrite: an object holding the value has nothing to write")
	}
	// The object carries this trace context already: nothing to add.
	if got := AddToPatch(ctx, map[string]string{TraceContextAnnotation: want}, set); !reflect.DeepEqual(got, set) {
		t.Fatalf("same value: want set unchanged, got %v", got)
	}
	// No span context in ctx: nothing to add.
	if got := AddToPatch(context.Background(), nil, nil); got != nil {
		t.Fatalf("no span: want nil, got %v", got)
	}
}
