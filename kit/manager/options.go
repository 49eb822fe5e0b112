// Package manager bootstraps a controller-runtime manager the same way in every
// Terrace binary: one set of flags, structured logging, metrics, health probes,
// leader election and per-controller defaults.
//
// Keeping this in one place means every component is operated identically:
// an operator who knows the flags of one Terrace binary knows them all.
//
// Typical use in a main package:
//
//	opts := manager.Options{}
//	opts.BindFlags(pflag.CommandLine)
//	pflag.Parse()
//	mgr, err := manager.New("dt-binder", scheme, opts)
//	// ... register controllers ...
//	err = manager.Run(ctrl.SetupSignalHandler(), mgr)
package manager

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Defaults for Options. They are exported so that a binary (or the Makefile
// starting several binaries on one host) can tell what it gets without a flag.
const (
	DefaultMetricsBindAddress      = ":8080"
	DefaultHealthProbeBindAddress  = ":8081"
	DefaultConcurrency             = 4
	DefaultKubeAPIQPS              = 500
	DefaultKubeAPIBurst            = 1000
	DefaultLogLevel                = "info"
	DefaultLogFormat               = "json"
	DefaultGracefulShutdownTimeout = 30 * time.Second
)

// Options are the operational settings shared by every Terrace binary.
//
// The zero value is usable: New fills unset fields with the defaults above.
type Options struct {
	// Kubeconfig is an explicit kubeconfig path. When empty the usual
	// controller-runtime lookup applies: $KUBECONFIG, then the in-cluster
	// service account, then ~/.kube/config.
	Kubeconfig string

	// MetricsBindAddress serves Prometheus metrics; "0" disables the server.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles (CPU, heap) for
	// finding what a controller spends its time on; empty or "0" (the
	// default) disables it. Bind it to localhost: profiles are not
	// authenticated.
	PprofBindAddress string

	// LeaderElect makes only one replica reconcile at a time. It is off by
	// default because the local environment runs a single process per
	// component; deployments with more than one replica must turn it on.
	LeaderElect bool
	// LeaderElectionID names the Lease; empty means "<component>.terrace.dev".
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; empty means the namespace the
	// pod runs in (controller-runtime's in-cluster detection).
	LeaderElectionNamespace string

	// Concurrency is the maximum number of concurrent reconciles per controller.
	Concurrency int

	// KubeAPIQPS and KubeAPIBurst bound the whole process's request rate
	// (one token bucket shared by every client the process creates), so that
	// a runaway loop in one controller cannot flood the API server. The
	// defaults are far above what a healthy controller needs at 1000 jobs in
	// flight (see docs/performance.md): they protect, they do not cap
	// throughput; the API server's priority and fairness does the rest. A
	// negative QPS disables client-side limiting.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// LogLevel is one of debug, info, error.
	LogLevel string
	// LogFormat is json (for log collectors) or console (for humans).
	LogFormat string

	// GracefulShutdownTimeout bounds how long in-flight reconciles may run
	// after a termination signal before the process exits anyway.
	GracefulShutdownTimeout time.Duration
}

// BindFlags registers the options as flags on fs.
//
// A field that is already set when BindFlags is called becomes that flag's
// default. This lets a binary pick its own defaults (for instance distinct
// ports, so that several binaries can run side by side on one host) while
// keeping the same flag names everywhere.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.setDefaults()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig. Empty means $KUBECONFIG, the in-cluster config, then ~/.kube/config.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		`Address the Prometheus metrics endpoint binds to; "0" disables it.`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		`Address the /healthz and /readyz endpoints bind to; "0" disables them.`)
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		`Address the /debug/pprof endpoints bind to (e.g. "127.0.0.1:6060"); "0" or empty disables them.`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Enable leader election so that only one replica is active at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID,
		`Name of the leader election Lease (default "<component>.terrace.dev").`)
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader election Lease (default: the namespace the pod runs in).")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency,
		"Maximum number of concurrent reconciles per controller.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Client-side QPS limit for requests to the Kubernetes API server; negative disables client-side limiting.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Client-side burst limit for requests to the Kubernetes API server.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "Log level: debug, info or error.")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "Log format: json or console.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout,
		"How long running reconciles may take to finish after a termination signal.")
}

// setDefaults fills unset fields. A zero value always means "the default",
// whether it comes from an unset field or from a flag such as --concurrency=0.
func (o *Options) setDefaults() {
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = DefaultMetricsBindAddress
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = DefaultHealthProbeBindAddress
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.KubeAPIQPS == 0 {
		o.KubeAPIQPS = DefaultKubeAPIQPS
	}
	if o.KubeAPIBurst == 0 {
		o.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if o.LogLevel == "" {
		o.LogLevel = DefaultLogLevel
	}
	if o.LogFormat == "" {
		o.LogFormat = DefaultLogFormat
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = DefaultGracefulShutdownTimeout
	}
}

// Validate reports every invalid option at once, so that an operator fixes a
// bad command line in one go instead of one flag per restart.
func (o Options) Validate() error {
	var errs []error
	switch o.LogLevel {
	case "", "debug", "info", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level: %q is not one of debug, info, error", o.LogLevel))
	}
	switch o.LogFormat {
	case "", "json", "console":
	default:
		errs = append(errs, fmt.Errorf("--log-format: %q is not one of json, console", o.LogFormat))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("--concurrency: must not be negative, got %d", o.Concurrency))
	}
	if o.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst: must not be negative, got %d", o.KubeAPIBurst))
	}
	if o.GracefulShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--graceful-shutdown-timeout: must not be negative, got %s", o.GracefulShutdownTimeout))
	}
	return errors.Join(errs...)
}
