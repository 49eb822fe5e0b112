package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// TracesFileEnv names the Terrace-specific variable that appends spans as JSON
// lines to a file.
const TracesFileEnv = "TERRACE_TRACES_FILE"

const (
	protocolGRPC         = "grpc"
	protocolHTTPProtobuf = "http/protobuf"
)

// enabled is set only while a real provider is installed; Inject reads it so
// that a process without tracing never adds annotations.
var enabled atomic.Bool

// Enabled reports whether a tracer provider is installed (by Setup or Install).
func Enabled() bool { return enabled.Load() }

// Install makes tp the global tracer provider, installs the W3C TraceContext
// propagator and turns Enabled on. Setup calls it; tests call it with an
// in-memory provider (go.opentelemetry.io/otel/sdk/trace/tracetest). Passing
// nil turns tracing off again and restores no-op globals.
func Install(tp trace.TracerProvider) {
	if tp == nil {
		enabled.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		return
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
}

// Setup installs a global tracer provider for serviceName when the
// environment turns tracing on (see the package documentation), and returns a
// shutdown function that flushes pending spans; call it before the process
// exits. When tracing is off it installs nothing and returns a no-op shutdown.
//
// An error means the environment asks for something unsupported (an unknown
// exporter or protocol, an unwritable file); binaries should refuse to start
// rather than run without the traces the operator asked for.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	noShutdown := func(context.Context) error { return nil }
	log := logf.Log.WithName("tracing")

	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		return noShutdown, err
	}
	if !cfg.on() {
		log.V(1).Info("tracing disabled")
		return noShutdown, nil
	}

	var p pipeline
	name, err := p.build(ctx, cfg, serviceName)
	if err != nil {
		// A failed Setup leaves no connection or open file behind.
		p.release(ctx)
		return noShutdown, err
	}
	logErrors(log)
	tp := sdktrace.NewTracerProvider(p.opts...)
	Install(tp)
	log.Info("tracing enabled", "serviceName", name,
		"otlp", cfg.otlp, "protocol", cfg.protocol, "console", cfg.console, "file", cfg.file)
	return p.shutdown(tp), nil
}

// pipeline is the tracer provider's exporters and resource, and what they
// hold open.
type pipeline struct {
	opts      []sdktrace.TracerProviderOption
	exporters []sdktrace.SpanExporter
	files     []io.Closer
}

// build adds the exporters cfg asks for and the resource naming the service;
// it returns the service name.
func (p *pipeline) build(ctx context.Context, cfg config, serviceName string) (string, error) {
	if cfg.otlp {
		if err := p.addOTLP(ctx, cfg.protocol); err != nil {
			return "", err
		}
	}
	if cfg.console {
		if err := p.addConsole(); err != nil {
			return "", err
		}
	}
	if cfg.file != "" {
		if err := p.addFile(cfg.file); err != nil {
			return "", err
		}
	}
	name := serviceNameFromEnv(serviceName)
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceNameKey.String(name)))
	if err != nil {
		return "", fmt.Errorf("building trace resource: %w", err)
	}
	p.opts = append(p.opts, sdktrace.WithResource(res))
	return name, nil
}

func (p *pipeline) addOTLP(ctx context.Context, protocol string) error {
	var exp sdktrace.SpanExporter
	var err error
	if protocol == protocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return fmt.Errorf("creating OTLP trace exporter: %w", err)
	}
	p.exporters = append(p.exporters, exp)
	// Batching keeps span export off the reconcile path.
	p.opts = append(p.opts, sdktrace.WithBatcher(exp))
	return nil
}

func (p *pipeline) addConsole() error {
	exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	if err != nil {
		return fmt.Errorf("creating console trace exporter: %w", err)
	}
	p.exporters = append(p.exporters, exp)
	p.opts = append(p.opts, sdktrace.WithSyncer(exp))
	return nil
}

// addFile appends spans as JSON lines to the file at path.
func (p *pipeline) addFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", TracesFileEnv, err)
	}
	p.files = append(p.files, f)
	exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
	if err != nil {
		return fmt.Errorf("creating file trace exporter: %w", err)
	}
	p.exporters = append(p.exporters, exp)
	p.opts = append(p.opts, sdktrace.WithSyncer(exp))
	return nil
}

// release undoes a half-built pipeline.
func (p *pipeline) release(ctx context.Context) {
	for _, e := range p.exporters {
		_ = e.Shutdown(ctx)
	}
	for _, f := range p.files {
		_ = f.Close()
	}
}

// shutdown flushes tp and closes the files; the provider shuts the exporters
// down first, so the files they write to are closed only afterwards.
func (p *pipeline) shutdown(tp *sdktrace.TracerProvider) func(context.Context) error {
	return func(ctx context.Context) error {
		enabled.Store(false)
		errs := []error{tp.Shutdown(ctx)}
		for _, f := range p.files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
}

// logErrors routes export failures, which OpenTelemetry reports through its
// global handler, into the structured log instead of the standard library log.
func logErrors(log logr.Logger) {
	otel.SetLogger(log)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Error(err, "OpenTelemetry error")
	}))
}

// config is what the environment asks for.
type config struct {
	otlp     bool
	protocol string
	console  bool
	file     string
}

func (c config) on() bool { return c.otlp || c.console || c.file != "" }

// configFromEnv interprets the OTEL_* variables (and TERRACE_TRACES_FILE). It
// takes getenv as a parameter so that tests need not touch the process
// environment.
func configFromEnv(getenv func(string) string) (config, error) {
	var c config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}

	exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		c.otlp = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	} else {
		for e := range strings.SplitSeq(exporters, ",") {
			switch strings.ToLower(strings.TrimSpace(e)) {
			case "otlp":
				c.otlp = true
			case "console":
				c.console = true
			case "none":
				return config{}, nil
			case "":
			default:
				return config{}, fmt.Errorf("OTEL_TRACES_EXPORTER: unsupported exporter %q (supported: otlp, console, none)", e)
			}
		}
	}
	c.file = strings.TrimSpace(getenv(TracesFileEnv))

	if c.otlp {
		c.protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		if c.protocol == "" {
			c.protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		switch c.protocol {
		case "":
			c.protocol = protocolHTTPProtobuf
		case protocolGRPC, protocolHTTPProtobuf:
		default:
			return config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol %q (supported: grpc, http/protobuf)", c.protocol)
		}
	}
	return c, nil
}

// serviceNameFromEnv lets OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
// override the binary's own name, as the OpenTelemetry specification requires.
func serviceNameFromEnv(serviceName string) string {
	if v, ok := resource.Environment().Set().Value(semconv.ServiceNameKey); ok && v.AsString() != "" {
		return v.AsString()
	}
	return serviceName
}
