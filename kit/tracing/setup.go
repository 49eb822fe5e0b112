package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

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

	var (
		opts      []sdktrace.TracerProviderOption
		exporters []sdktrace.SpanExporter
		files     []io.Closer
	)
	// release undoes a half-built setup so that a failed Setup leaves no
	// connection or open file behind.
	release := func() {
		for _, e := range exporters {
			_ = e.Shutdown(ctx)
		}
		for _, f := range files {
			_ = f.Close()
		}
	}

	if cfg.otlp {
		var exp sdktrace.SpanExporter
		if cfg.protocol == protocolGRPC {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return noShutdown, fmt.Errorf("creating OTLP trace exporter: %w", err)
		}
		exporters = append(exporters, exp)
		// Batching keeps span export off the reconcile path.
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if cfg.console {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
		if err != nil {
			release()
			return noShutdown, fmt.Errorf("creating console trace exporter: %w", err)
		}
		exporters = append(exporters, exp)
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	if cfg.file != "" {
		f, err := os.OpenFile(cfg.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			release()
			return noShutdown, fmt.Errorf("opening %s: %w", TracesFileEnv, err)
		}
		files = append(files, f)
		exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
		if err != nil {
			release()
			return noShutdown, fmt.Errorf("creating file trace exporter: %w", err)
		}
		exporters = append(exporters, exp)
		opts = append(opts, sdktrace.WithSyncer(exp))
	}

	name := serviceNameFromEnv(serviceName)
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceNameKey.String(name)))
	if err != nil {
		release()
		return noShutdown, fmt.Errorf("building trace resource: %w", err)
	}
	opts = append(opts, sdktrace.WithResource(res))

	// Export failures are reported through OpenTelemetry's global handler;
	// route them into the structured log instead of the standard library log.
	otel.SetLogger(log)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Error(err, "OpenTelemetry error")
	}))

	tp := sdktrace.NewTracerProvider(opts...)
	Install(tp)
	log.Info("tracing enabled", "serviceName", name,
		"otlp", cfg.otlp, "protocol", cfg.protocol, "console", cfg.console, "file", cfg.file)

	return func(ctx context.Context) error {
		enabled.Store(false)
		// The provider flushes and shuts down the exporters; the files
		// they write to are closed only afterwards.
		errs := []error{tp.Shutdown(ctx)}
		for _, f := range files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}, nil
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
