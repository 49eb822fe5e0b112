package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestBindFlagsDefaults(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := Options{
		MetricsBindAddress:      ":8080",
		HealthProbeBindAddress:  ":8081",
		Concurrency:             4,
		KubeAPIQPS:              500,
		KubeAPIBurst:            1000,
		LogLevel:                "info",
		LogFormat:               "json",
		GracefulShutdownTimeout: 30 * time.Second,
	}
	if o != want {
		t.Fatalf("defaults = %+v, want %+v", o, want)
	}
}

func TestBindFlagsParse(t *testing.T) {
	// A preset field becomes the flag's default; flags still override.
	o := Options{MetricsBindAddress: ":9090", HealthProbeBindAddress: ":9091"}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	err := fs.Parse([]string{
		"--kubeconfig=/k", "--health-probe-bind-address=:7000", "--leader-elect",
		"--leader-election-id=x", "--leader-election-namespace=ns", "--concurrency=8",
		"--kube-api-qps=5.5", "--kube-api-burst=7", "--log-level=debug", "--log-format=console",
		"--graceful-shutdown-timeout=5s", "--pprof-bind-address=127.0.0.1:6060",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Kubeconfig:              "/k",
		MetricsBindAddress:      ":9090",
		HealthProbeBindAddress:  ":7000",
		PprofBindAddress:        "127.0.0.1:6060",
		LeaderElect:             true,
		LeaderElectionID:        "x",
		LeaderElectionNamespace: "ns",
		Concurrency:             8,
		KubeAPIQPS:              5.5,
		KubeAPIBurst:            7,
		LogLevel:                "debug",
		LogFormat:               "console",
		GracefulShutdownTimeout: 5 * time.Second,
	}
	if o != want {
		t.Fatalf("parsed = %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	o := Options{LogLevel: "verbose", LogFormat: "xml", Concurrency: -1, KubeAPIBurst: -1}
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted bad options")
	}
	for _, want := range []string{`--log-level: "verbose"`, `--log-format: "xml"`, "--concurrency", "--kube-api-burst"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero Options rejected: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := New("test", runtime.NewScheme(), Options{LogLevel: "loud"})
	if err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Fatalf("New with a bad log level: err = %v", err)
	}
	if _, err := New("", runtime.NewScheme(), Options{}); err == nil {
		t.Fatal("New accepted an empty component name")
	}
}

// writeKubeconfig points at an address nothing listens on: building a manager
// must not need a reachable API server.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: t}
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRESTConfig(t *testing.T) {
	cfg, err := RESTConfig("dt-binder", Options{Kubeconfig: writeKubeconfig(t), KubeAPIQPS: 3, KubeAPIBurst: 6})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:1" || cfg.QPS != 3 || cfg.Burst != 6 {
		t.Errorf("config host=%s qps=%v burst=%d", cfg.Host, cfg.QPS, cfg.Burst)
	}
	if cfg.RateLimiter == nil || cfg.RateLimiter.QPS() != 3 {
		t.Errorf("want one rate limiter of 3 QPS shared by the process's clients, got %v", cfg.RateLimiter)
	}
	if !strings.HasPrefix(cfg.UserAgent, "terrace-dt-binder ") {
		t.Errorf("user agent %q does not name the component", cfg.UserAgent)
	}

	// An API warning repeated on every write is logged once.
	var lines []string
	logger := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	ctx := crlog.IntoContext(context.Background(), logger)
	for range 3 {
		cfg.WarningHandlerWithContext.HandleWarningHeaderWithContext(ctx, 299, "-", "prefer a domain-qualified finalizer name")
	}
	cfg.WarningHandlerWithContext.HandleWarningHeaderWithContext(ctx, 299, "-", "another warning")
	if len(lines) != 2 {
		t.Errorf("want each distinct API warning logged once, got %d lines: %q", len(lines), lines)
	}

	// A negative QPS leaves limiting to the API server.
	unlimited, err := RESTConfig("dt-binder", Options{Kubeconfig: writeKubeconfig(t), KubeAPIQPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if unlimited.RateLimiter != nil || unlimited.QPS >= 0 {
		t.Errorf("negative QPS: rate limiter %v, qps %v", unlimited.RateLimiter, unlimited.QPS)
	}

	// $KUBECONFIG is honoured when no flag is given.
	t.Setenv("KUBECONFIG", writeKubeconfig(t))
	cfg, err = RESTConfig("x", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:1" || cfg.QPS != DefaultKubeAPIQPS || cfg.Burst != DefaultKubeAPIBurst {
		t.Errorf("config from $KUBECONFIG host=%s qps=%v burst=%d", cfg.Host, cfg.QPS, cfg.Burst)
	}
}

func TestNew(t *testing.T) {
	mgr, err := New("test", clientgoscheme.Scheme, Options{
		Kubeconfig:             writeKubeconfig(t),
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		Concurrency:            2,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := mgr.GetControllerOptions()
	if got.MaxConcurrentReconciles != 2 || got.RecoverPanic == nil || !*got.RecoverPanic {
		t.Errorf("controller options = %+v", got)
	}
}

func TestControllerConfigDefaults(t *testing.T) {
	if got := (Options{}).ControllerConfig().MaxConcurrentReconciles; got != DefaultConcurrency {
		t.Errorf("MaxConcurrentReconciles = %d, want %d", got, DefaultConcurrency)
	}
}
