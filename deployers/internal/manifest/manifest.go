package manifest

import (
	"context"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Type is the deploy-item type the manifest deployer serves.
const Type = lsv1alpha1.ManifestDeployItemType

// DefaultName is the deployer name used when Options.Name is empty.
const DefaultName = "manifest-deployer"

// Options configure the manifest deployer. The zero value is usable.
type Options struct {
	// Name is the deployer's name: status.deployer.name, controller name and
	// the field manager on the deploy items and on the target cluster;
	// default "manifest-deployer". Two deployers in one manager need distinct names.
	Name string
	// Identity is status.deployer.identity; default Name.
	Identity string
	// Version is status.deployer.version.
	Version string
	// TargetSelector restricts the items served to those whose Target matches.
	TargetSelector lib.TargetSelector
	// DefaultTimeout bounds a job whose item has no spec.timeout (default 10m; see lib.Options).
	DefaultTimeout timeout.Timeout
	// Namespaces restricts the deploy items served to these namespaces
	// (default: all). Set it when the manager's cache is restricted to
	// namespaces (e.g. one manager per test namespace): the deployer watches
	// items with an informer of its own.
	Namespaces []string
	// Hooks are further extension hooks (the continuous-reconcile hook is always registered).
	Hooks extension.ReconcileExtensionHooks
	// CallTimeout bounds each call of the deployer (see lib.Options).
	CallTimeout time.Duration
	// TargetClients bound every connection to a Target's cluster: response
	// size, request timeout, addresses (see lib.TargetClientOptions).
	TargetClients lib.TargetClientOptions
	// MinContinuousReconcileInterval is the smallest
	// continuousReconcile.every accepted (default 1m): a smaller one fails
	// the item, so a tenant cannot make the deployer re-apply in a loop.
	MinContinuousReconcileInterval time.Duration
}

// DefaultMinContinuousReconcileInterval is the default of
// Options.MinContinuousReconcileInterval.
const DefaultMinContinuousReconcileInterval = time.Minute

// BindFlags registers the manifest deployer's own flags on fs: the bounds
// of target connections and --min-continuous-reconcile-interval.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.TargetClients.BindFlags(fs)
	if o.MinContinuousReconcileInterval <= 0 {
		o.MinContinuousReconcileInterval = DefaultMinContinuousReconcileInterval
	}
	fs.DurationVar(&o.MinContinuousReconcileInterval, "min-continuous-reconcile-interval", o.MinContinuousReconcileInterval,
		"The smallest spec.config.continuousReconcile.every a manifest deploy item may ask for; a smaller one fails the item.")
}

// AddToManager registers the manifest deployer controller with mgr.
func AddToManager(mgr ctrl.Manager, opts Options) error {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.MinContinuousReconcileInterval <= 0 {
		opts.MinContinuousReconcileInterval = DefaultMinContinuousReconcileInterval
	}
	hooks := extension.ReconcileExtensionHooks{}.RegisterHookSetup(continuousReconcileHook(opts.MinContinuousReconcileInterval))
	for ht, fns := range opts.Hooks {
		for _, fn := range fns {
			hooks.RegisterHook(fn, ht)
		}
	}
	d := &deployer{
		client:     mgr.GetClient(),
		fieldOwner: opts.Name,
		hooks:      hooks,
		targets:    newTargetClients(mgr, opts.TargetClients),
		minEvery:   opts.MinContinuousReconcileInterval,
	}
	return lib.AddToManager(mgr, d, lib.Options{
		Type:           Type,
		Name:           opts.Name,
		Identity:       opts.Identity,
		Version:        opts.Version,
		TargetSelector: opts.TargetSelector,
		TargetType:     lsv1alpha1.KubernetesClusterTargetType,
		DefaultTimeout: opts.DefaultTimeout,
		CallTimeout:    opts.CallTimeout,
		Namespaces:     opts.Namespaces,
	})
}

type deployer struct {
	client     client.Client
	fieldOwner string
	hooks      extension.ReconcileExtensionHooks
	targets    *targetClients
	// minEvery is Options.MinContinuousReconcileInterval.
	minEvery time.Duration
}

func (d *deployer) ExtensionHooks() extension.ReconcileExtensionHooks { return d.hooks }

// ForceReconcile applies as Reconcile does: every apply is a full one.
func (d *deployer) ForceReconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	return d.Reconcile(ctx, req)
}

// Abort has nothing to stop: applying is synchronous within a reconcile, and
// what was applied stays (it is removed when the item is deleted).
func (d *deployer) Abort(context.Context, *lib.Request) (lib.Result, error) { return lib.Done(), nil }

// TracerName names the manifest deployer's tracer. Its spans are children of
// the library's "DeployItem.Apply" / "DeployItem.Delete":
// "DeployItem.ApplyManifests", "DeployItem.DeleteManifests",
// "DeployItem.CheckReadiness".
const TracerName = "github.com/terrace-dev/terrace/deployers/internal/manifest"

// tracer is looked up per call, as the global provider may be installed
// after the deployer was built.
func tracer() trace.Tracer { return otel.Tracer(TracerName) }
