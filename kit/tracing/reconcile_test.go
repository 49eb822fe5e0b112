package tracing

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStartReconcileContinuesTheHandedOverTrace(t *testing.T) {
	_, rec := installRecorder(t)
	parent := remoteContext(t, "")
	annotations := Inject(parent, nil)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Annotations: annotations}}

	ctx, span := StartReconcile(context.Background(), otel.Tracer("test"), "Thing", obj, "job-1")
	if !span.SpanContext().IsValid() {
		t.Fatal("span context not valid")
	}
	_ = ctx
	EndReconcile(span, "Succeeded", errors.New("boom"))

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("want 1 span, got %d", len(spans))
	}
	s := spans[0]
	if s.Name() != "Thing.Reconcile" {
		t.Errorf("name = %q", s.Name())
	}
	if got, want := s.Parent().SpanID().String(), "00f067aa0ba902b7"; got != want {
		t.Errorf("parent span = %s, want %s", got, want)
	}
	if got, want := s.SpanContext().TraceID().String(), "4bf92f3577b34da6a3ce929d0e0e4736"; got != want {
		t.Errorf("trace = %s, want %s", got, want)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		string(AttrKind): "Thing", string(AttrNamespace): "ns", string(AttrName): "cm",
		string(AttrJobID): "job-1", string(AttrPhase): "Succeeded",
	} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if s.Status().Code != codes.Error || len(s.Events()) == 0 {
		t.Errorf("error not recorded: status %v, events %d", s.Status(), len(s.Events()))
	}
}

func TestStartReconcileWithoutAnnotationStartsANewTrace(t *testing.T) {
	_, rec := installRecorder(t)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	_, span := StartReconcile(context.Background(), otel.Tracer("test"), "Thing", obj, "")
	EndReconcile(span, "", nil)
	s := rec.Ended()[0]
	if s.Parent().IsValid() {
		t.Errorf("span has a parent %v, want a new trace", s.Parent())
	}
	if s.Status().Code == codes.Error {
		t.Error("status is error without an error")
	}
	// A reconcile outside any job carries no job ID attribute, not an empty one.
	for _, kv := range s.Attributes() {
		if kv.Key == AttrJobID {
			t.Errorf("attribute %s = %q on a reconcile without a job, want none", kv.Key, kv.Value.String())
		}
	}
}
