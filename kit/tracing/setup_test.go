package tracing

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    config
		wantErr bool
	}{
		{name: "nothing set is off"},
		{name: "endpoint turns otlp on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			want: config{otlp: true, protocol: "http/protobuf"}},
		{name: "traces endpoint turns otlp on", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
			want: config{otlp: true, protocol: "http/protobuf"}},
		{name: "explicit otlp with grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: config{otlp: true, protocol: "grpc"}},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			want: config{otlp: true, protocol: "http/protobuf"}},
		{name: "console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: config{console: true}},
		{name: "console without otlp despite endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "console",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: config{console: true}},
		{name: "list", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"},
			want: config{otlp: true, console: true, protocol: "http/protobuf"}},
		{name: "file alone", env: map[string]string{TracesFileEnv: "/tmp/spans"}, want: config{file: "/tmp/spans"}},
		{name: "none wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", TracesFileEnv: "/tmp/spans",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := configFromEnv(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// clearOTELEnv keeps the developer's own environment out of the test.
func clearOTELEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", TracesFileEnv} {
		t.Setenv(k, "")
	}
}

func TestSetupDisabled(t *testing.T) {
	clearOTELEnv(t)
	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("tracing enabled without any OTEL_* variable")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupFileExporter(t *testing.T) {
	clearOTELEnv(t)
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	t.Setenv(TracesFileEnv, path)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")

	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Install(nil) })
	if !Enabled() {
		t.Fatal("tracing not enabled with " + TracesFileEnv)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "hello")
	span.End()
	traceID := span.SpanContext().TraceID().String()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Error("tracing still enabled after shutdown")
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var lines []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 1 {
		t.Fatalf("file holds %d spans, want 1", len(lines))
	}
	if lines[0]["Name"] != "hello" {
		t.Errorf("span name %v, want hello", lines[0]["Name"])
	}
	if sc, _ := lines[0]["SpanContext"].(map[string]any); sc["TraceID"] != traceID {
		t.Errorf("span context %v, want trace ID %s", lines[0]["SpanContext"], traceID)
	}
	var service any
	resAttrs, _ := lines[0]["Resource"].([]any)
	for _, a := range resAttrs {
		if kv, _ := a.(map[string]any); kv["Key"] == "service.name" {
			service = kv["Value"].(map[string]any)["Value"]
		}
	}
	if service != "from-env" {
		t.Errorf("service.name = %v, want from-env (OTEL_SERVICE_NAME)", service)
	}
}

func TestSetupReportsUnwritableFile(t *testing.T) {
	clearOTELEnv(t)
	t.Setenv(TracesFileEnv, filepath.Join(t.TempDir(), "missing-dir", "spans.jsonl"))
	if _, err := Setup(context.Background(), "test"); err == nil {
		t.Fatal("Setup accepted a file in a missing directory")
	}
	if Enabled() {
		t.Fatal("tracing enabled after a failed Setup")
	}
}
