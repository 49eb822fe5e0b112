// Package tracing sets up OpenTelemetry tracing for a Terrace binary and carries
// trace context between binaries through an object annotation.
//
// Terrace controllers never call each other; they communicate only through
// Kubernetes objects. To make one job one trace across every binary it passes
// through, the writer of an object stores its current span context in the
// annotation TraceContextAnnotation (Inject) and the reader continues the trace
// from it (Extract).
//
// # Turning tracing on
//
// Tracing is off by default and costs nothing then: no provider is installed,
// and Inject leaves annotations untouched, so a disabled tracer never causes an
// API write. Setup reads the standard OpenTelemetry environment variables:
//
//   - OTEL_SDK_DISABLED=true turns everything off.
//   - OTEL_TRACES_EXPORTER is a comma-separated list of "otlp", "console" and
//     "none". "none" turns tracing off (it wins over everything else, including
//     TERRACE_TRACES_FILE). When the variable is unset, tracing is on with the
//     otlp exporter only if OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
//     selects "grpc" or "http/protobuf" (the default, as in the specification).
//     The other OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout,
//     TLS) are read by the exporter itself.
//   - OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) overrides
//     the service name the binary passes to Setup.
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG are honoured by the SDK;
//     the default samples every trace whose parent is sampled or absent.
//
// For debugging without a collector there are two file exporters, both writing
// one JSON object per finished span per line:
//
//   - OTEL_TRACES_EXPORTER=console writes spans to standard output (logs go
//     to standard error, so the two do not mix).
//   - TERRACE_TRACES_FILE=<path> (Terrace-specific) appends spans to <path>,
//     creating it if needed. It works alone or together with the exporters
//     above. Several binaries may share one file: each span is written with a
//     single append.
//
// Console and file spans are written synchronously when a span ends, so the
// output is complete at any moment (handy for tests reading the file); OTLP
// export is batched.
//
// # Annotation format
//
// TraceContextAnnotation holds the W3C traceparent, optionally followed by a
// semicolon and the W3C tracestate:
//
//	terrace.dev/trace-context: 00-<trace-id>-<span-id>-<flags>[;<tracestate>]
//
// A traceparent never contains a semicolon, so the value splits unambiguously
// at the first one. The tracestate is dropped when the whole value would exceed
// MaxAnnotationSize bytes, which keeps annotations (and the objects carrying
// them) small whatever vendors put into tracestate.
package tracing
