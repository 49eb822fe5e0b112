package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	goruntime "runtime"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// New builds a manager for component (for example "execution-controller")
// from validated options. It also installs the process-wide logger, so call
// it before anything that logs through controller-runtime or client-go.
//
// The manager is not started; register controllers, then call Run.
func New(component string, scheme *runtime.Scheme, o Options) (ctrl.Manager, error) {
	if component == "" {
		return nil, errors.New("manager: component name must not be empty")
	}
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}

	log, err := SetupLogging(component, o)
	if err != nil {
		return nil, err
	}

	cfg, err := RESTConfig(component, o)
	if err != nil {
		return nil, err
	}

	leaderElectionID := o.LeaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = component + ".terrace.dev"
	}
	mgr, err := ctrl.NewManager(cfg, managerOptions(scheme, log, leaderElectionID, o))
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := addHealthChecks(mgr); err != nil {
		return nil, err
	}

	log.Info("manager configured",
		"host", cfg.Host,
		"metricsBindAddress", o.MetricsBindAddress,
		"healthProbeBindAddress", o.HealthProbeBindAddress,
		"leaderElect", o.LeaderElect,
		"leaderElectionID", leaderElectionID,
		"concurrency", o.Concurrency,
		"kubeAPIQPS", o.KubeAPIQPS,
		"kubeAPIBurst", o.KubeAPIBurst,
	)
	return mgr, nil
}

func managerOptions(scheme *runtime.Scheme, log logr.Logger, leaderElectionID string, o Options) ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress: o.HealthProbeBindAddress,
		PprofBindAddress:       o.PprofBindAddress,
		// Objects are cached without managedFields: no Terrace controller
		// reads them from the cache, and they are often the bulk of an
		// object (less memory, cheaper deep copies).
		Cache:            cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		LeaderElection:   o.LeaderElect,
		LeaderElectionID: leaderElectionID,
		// Empty lets controller-runtime use the pod's own namespace.
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Releasing the Lease on shutdown lets a standby replica take over at
		// once instead of waiting for the lease to expire. It is safe because
		// Run returns (and the process exits) as soon as the manager stops.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(o.GracefulShutdownTimeout),
		Controller:                    o.ControllerConfig(),
	}
}

// addHealthChecks makes the process alive (healthz) as soon as the HTTP
// server is up, and ready (readyz) only once the informer caches have
// synced: a process whose caches never sync (an informer that cannot list:
// missing RBAC, an API server without a field the cache selects on) must not
// look ready. Binaries with caches of their own add a CacheSynced check for
// each.
func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", CacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding readyz check: %w", err)
	}
	return nil
}

// Run starts the manager and blocks until ctx is cancelled (normally by
// ctrl.SetupSignalHandler) and in-flight reconciles have drained, or until
// the manager fails. The caller should exit the process when Run returns:
// the leader Lease has already been released by then.
func Run(ctx context.Context, mgr ctrl.Manager) error {
	log := mgr.GetLogger()
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped with error")
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("manager stopped")
	return nil
}

// ControllerConfig is the per-controller default every Terrace controller gets
// from the manager: a bounded number of parallel reconciles, and panics turned
// into reconcile errors (retried with back-off) instead of crashing the whole
// binary, so one bad object cannot take down every other object's reconcile.
//
// New applies it already; it is exported for tests that build their own
// manager against a test environment.
func (o Options) ControllerConfig() crconfig.Controller {
	concurrency := o.Concurrency
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	return crconfig.Controller{
		RecoverPanic:            ptr.To(true),
		MaxConcurrentReconciles: concurrency,
	}
}

// SetupLogging builds the structured (zap) logger described by o, tagged with
// the component name, and installs it for controller-runtime and for
// client-go's klog, so that every line the process writes has the same format.
// New calls it; calling it earlier (to log before the manager exists) is fine.
func SetupLogging(component string, o Options) (logr.Logger, error) {
	log, err := newLogger(component, o, os.Stderr)
	if err != nil {
		return logr.Discard(), err
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log.WithName("client-go"))
	return log, nil
}

// newLogger builds the logger SetupLogging installs, writing to w.
func newLogger(component string, o Options, w io.Writer) (logr.Logger, error) {
	o.setDefaults()
	var level zapcore.Level
	switch o.LogLevel {
	case "debug":
		level = zapcore.DebugLevel // logr V(1)
	case "info":
		level = zapcore.InfoLevel
	case "error":
		level = zapcore.ErrorLevel
	default:
		return logr.Discard(), fmt.Errorf("--log-level: %q is not one of debug, info, error", o.LogLevel)
	}
	zapOpts := []crzap.Opts{crzap.Level(level), crzap.WriteTo(w)}
	switch o.LogFormat {
	case "json":
		zapOpts = append(zapOpts, crzap.JSONEncoder())
	case "console":
		zapOpts = append(zapOpts, crzap.ConsoleEncoder())
	default:
		return logr.Discard(), fmt.Errorf("--log-format: %q is not one of json, console", o.LogFormat)
	}

	// The filter wraps the root logger, so that it also covers the loggers
	// derived from it: controller-runtime's "events" logger (the recorder's
	// broadcaster) and client-go's klog logger (the older broadcaster).
	log := quietTerminatingNamespaceEvents(crzap.New(zapOpts...)).WithValues("component", component)
	return log, nil
}

// RESTConfig loads the API server connection for component. An explicit
// --kubeconfig wins; otherwise controller-runtime's lookup applies
// ($KUBECONFIG, in-cluster, ~/.kube/config). The user agent names the
// component so that API server audit logs and metrics tell binaries apart.
func RESTConfig(component string, o Options) (*rest.Config, error) {
	o.setDefaults()
	var (
		cfg *rest.Config
		err error
	)
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig},
			&clientcmd.ConfigOverrides{},
		).ClientConfig()
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	if o.KubeAPIQPS > 0 {
		// One bucket for the process: controller-runtime creates a REST
		// client per resource type, and each would otherwise get its own
		// QPS, making the flag mean "per resource type".
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.KubeAPIQPS, o.KubeAPIBurst)
	}
	cfg.UserAgent = fmt.Sprintf("terrace-%s (%s/%s)", component, goruntime.GOOS, goruntime.GOARCH)
	// API warnings are logged once per distinct message: kube-apiserver
	// repeats the same warning on every write (e.g. on the Landscaper
	// finalizer name, which the seeds fix), and one line says it all.
	cfg.WarningHandlerWithContext = crlog.NewKubeAPIWarningLogger(crlog.KubeAPIWarningLoggerOptions{Deduplicate: true})
	return cfg, nil
}

// AddCache makes mgr run c, a cache of a binary's own (one with selectors
// the manager's cache cannot have): started with the manager's cache, before
// any controller, which waits for it to sync; and the readiness check name
// (CacheSynced) keeps the process unready until it has.
func AddCache(mgr ctrl.Manager, name string, c cache.Cache) error {
	if err := mgr.Add(cacheRunnable{c}); err != nil {
		return fmt.Errorf("adding cache %s: %w", name, err)
	}
	if err := mgr.AddReadyzCheck(name, CacheSynced(c)); err != nil {
		return fmt.Errorf("adding the readiness check of cache %s: %w", name, err)
	}
	return nil
}

// cacheRunnable puts a cache into the manager's group of caches, which
// start before the controllers.
type cacheRunnable struct{ cache.Cache }

func (c cacheRunnable) GetCache() cache.Cache { return c.Cache }

// cacheSyncWait bounds how long one readiness probe waits for a cache.
const cacheSyncWait = time.Second

// CacheSynced is a readiness check that passes once every informer of c has
// synced (at once after that; before, it fails after waiting up to a second).
func CacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	}
}
