package helm

import (
	"context"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/bytesize"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Type is the deploy-item type the helm deployer serves.
const Type = lsv1alpha1.HelmDeployItemType

// DefaultName is the deployer name used when Options.Name is empty.
const DefaultName = "helm-deployer"

// Defaults of the chart source bounds.
const (
	DefaultMaxChartBytes          = 10 << 20
	DefaultRegistryRequestTimeout = 30 * time.Second
	DefaultMaxReleaseHistory      = 10
	DefaultChartCacheBytes        = 64 << 20
	DefaultMaxRepoIndexBytes      = 32 << 20
	DefaultRepoIndexCacheBytes    = 64 << 20
	DefaultRepoIndexTTL           = time.Minute
	DefaultChartCacheDirBytes     = 1 << 30
	// DefaultMaxReleaseRecordBytes: Helm's records are at most 1 MiB
	// compressed (a Secret), and the JSON of charts and values rarely
	// compresses more than tenfold; a gzip bomb inflates a thousandfold.
	DefaultMaxReleaseRecordBytes = 32 << 20
)

// Options configure the helm deployer. The zero value is usable.
type Options struct {
	// Name is status.deployer.name, the controller name and the field
	// manager; default "helm-deployer".
	Name string
	// Identity is status.deployer.identity; default Name.
	Identity string
	// Version is status.deployer.version.
	Version string
	// TargetSelector restricts the items served to those whose Target matches.
	TargetSelector lib.TargetSelector
	// DefaultTimeout bounds a job whose item has no spec.timeout (see lib.Options).
	DefaultTimeout timeout.Timeout
	// CallTimeout bounds each call of the deployer (see lib.Options).
	CallTimeout time.Duration
	// Namespaces restricts the deploy items served to these namespaces (default: all).
	Namespaces []string
	// TargetClients bound every connection to a Target's cluster.
	TargetClients lib.TargetClientOptions
	// Charts bound every chart download.
	Charts ChartSourceOptions
	// MinContinuousReconcileInterval is the most frequent
	// spec.config.continuousReconcile an item may ask for
	// (--min-continuous-reconcile-interval, default 1m); a more frequent
	// schedule fails the item.
	MinContinuousReconcileInterval time.Duration
	// MaxReleaseHistory is how many revisions of a release Helm keeps on
	// the target (--max-release-history, default 10); older ones are
	// deleted on upgrade.
	MaxReleaseHistory int
	// MaxReleaseRecordBytes bounds a release record read from a target
	// cluster, decompressed: the JSON of the release, its chart and values
	// (--max-release-record-bytes, default 32Mi); a record over it fails
	// the item.
	MaxReleaseRecordBytes int64
}

// ChartSourceOptions bound what the deployer downloads to get a chart.
type ChartSourceOptions struct {
	// MaxChartBytes caps a chart archive, downloaded or inline
	// (--max-chart-bytes); each registry response is capped at it too.
	MaxChartBytes int64
	// RequestTimeout bounds each request to a registry, the body included
	// (--registry-request-timeout).
	RequestTimeout time.Duration
	// AllowLoopback lets chart references name loopback registries, which
	// are then spoken to in plain HTTP (--allow-loopback-registries): for
	// local environments and tests.
	AllowLoopback bool
	// CacheBytes is the memory the chart cache keeps archives in
	// (--chart-cache-bytes); least recently used archives leave first.
	CacheBytes int64
	// CacheDir, when set, keeps cached archives on disk too, as files
	// named by their digest (--chart-cache-dir): they survive a restart.
	CacheDir string
	// CacheDirBytes bounds the files in CacheDir (--chart-cache-dir-bytes).
	CacheDirBytes int64
	// MaxRepoIndexBytes caps a chart repository's index.yaml
	// (--max-chart-repo-index-bytes).
	MaxRepoIndexBytes int64
	// RepoIndexCacheBytes bounds the memory of cached repository indexes
	// (--chart-repo-index-cache-bytes).
	RepoIndexCacheBytes int64
	// RepoIndexTTL is how long a repository index, and the archive an
	// archive URL served, are reused before they are fetched again
	// (--chart-repo-index-ttl).
	RepoIndexTTL time.Duration
}

func (o *ChartSourceOptions) setDefaults() {
	if o.MaxChartBytes <= 0 {
		o.MaxChartBytes = DefaultMaxChartBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRegistryRequestTimeout
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultChartCacheBytes
	}
	if o.CacheDirBytes <= 0 {
		o.CacheDirBytes = DefaultChartCacheDirBytes
	}
	if o.MaxRepoIndexBytes <= 0 {
		o.MaxRepoIndexBytes = DefaultMaxRepoIndexBytes
	}
	if o.RepoIndexCacheBytes <= 0 {
		o.RepoIndexCacheBytes = DefaultRepoIndexCacheBytes
	}
	if o.RepoIndexTTL <= 0 {
		o.RepoIndexTTL = DefaultRepoIndexTTL
	}
}

func (o *Options) setDefaults() {
	o.Charts.setDefaults()
	if o.MaxReleaseHistory <= 0 {
		o.MaxReleaseHistory = DefaultMaxReleaseHistory
	}
	if o.MaxReleaseRecordBytes <= 0 {
		o.MaxReleaseRecordBytes = DefaultMaxReleaseRecordBytes
	}
	if o.MinContinuousReconcileInterval <= 0 {
		o.MinContinuousReconcileInterval = manifest.DefaultMinContinuousReconcileInterval
	}
}

// BindFlags registers the helm deployer's own flags on fs: the bounds of
// target connections and of chart downloads.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.TargetClients.BindFlags(fs)
	o.Charts.setDefaults()
	o.setDefaults()
	fs.DurationVar(&o.MinContinuousReconcileInterval, "min-continuous-reconcile-interval", o.MinContinuousReconcileInterval,
		"The most frequent spec.config.continuousReconcile (every, or the gap between two cron times) a helm deploy item may ask for; a more frequent one fails the item.")
	fs.IntVar(&o.MaxReleaseHistory, "max-release-history", o.MaxReleaseHistory,
		"How many revisions of a release Helm keeps on the target cluster (release Secrets); older ones are deleted on upgrade.")
	fs.Var(bytesize.Flag(&o.MaxReleaseRecordBytes), "max-release-record-bytes",
		"The largest release record (a release Secret on the target cluster, decompressed) the deployer reads, e.g. 32Mi; a larger one fails the item.")
	fs.Var(bytesize.Flag(&o.Charts.MaxChartBytes), "max-chart-bytes",
		"The largest chart archive the deployer accepts, e.g. 10Mi: inline (chart.archive.raw, decoded) or downloaded (each registry or chart server response); a larger one fails the item.")
	fs.DurationVar(&o.Charts.RequestTimeout, "registry-request-timeout", o.Charts.RequestTimeout,
		"How long one request to a chart registry, chart repository or archive URL may take, reading the response included.")
	fs.BoolVar(&o.Charts.AllowLoopback, "allow-loopback-registries", o.Charts.AllowLoopback,
		"Let chart references name registries and chart servers on loopback addresses (127.0.0.0/8, ::1, localhost), registries spoken to in plain HTTP: for local environments and tests.")
	o.bindChartCacheFlags(fs)
}

func (o *Options) bindChartCacheFlags(fs *pflag.FlagSet) {
	fs.Var(bytesize.Flag(&o.Charts.CacheBytes), "chart-cache-bytes",
		"The memory the chart cache keeps archives in, e.g. 64Mi; a chart fetched once is served from it to every item that names the same content.")
	fs.StringVar(&o.Charts.CacheDir, "chart-cache-dir", o.Charts.CacheDir,
		"A directory where the chart cache keeps archives too, named by their digest, so that they survive a restart; empty: memory only.")
	fs.Var(bytesize.Flag(&o.Charts.CacheDirBytes), "chart-cache-dir-bytes",
		"The disk the archives in --chart-cache-dir may take, e.g. 1Gi; least recently used ones are removed first.")
	fs.Var(bytesize.Flag(&o.Charts.MaxRepoIndexBytes), "max-chart-repo-index-bytes",
		"The largest index.yaml of a chart repository the deployer reads, e.g. 32Mi; a larger one fails the item.")
	fs.Var(bytesize.Flag(&o.Charts.RepoIndexCacheBytes), "chart-repo-index-cache-bytes",
		"The memory cached chart repository indexes may take, e.g. 64Mi.")
	fs.DurationVar(&o.Charts.RepoIndexTTL, "chart-repo-index-ttl", o.Charts.RepoIndexTTL,
		"How long a chart repository's index.yaml, and the archive a chart.archive.remote URL served, are reused before they are fetched again.")
}

// AddToManager registers the helm deployer controller with mgr.
func AddToManager(mgr ctrl.Manager, opts Options) error {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	opts.setDefaults()
	charts, err := newChartSource(opts.Charts, mgr.GetClient(), mgr.GetAPIReader())
	if err != nil {
		return err
	}
	d := &deployer{
		client:     mgr.GetClient(),
		fieldOwner: opts.Name,
		targets:    newTargetClients(mgr, opts.TargetClients),
		charts:     charts,
		maxHistory: opts.MaxReleaseHistory,
		maxRecord:  opts.MaxReleaseRecordBytes,
		minEvery:   opts.MinContinuousReconcileInterval,
		hooks:      extension.ReconcileExtensionHooks{}.RegisterHookSetup(continuousReconcileHook(opts.MinContinuousReconcileInterval)),
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
	targets    *targetClients
	charts     *chartSource
	// maxHistory is Options.MaxReleaseHistory.
	maxHistory int
	// maxRecord is Options.MaxReleaseRecordBytes.
	maxRecord int64
	// minEvery is Options.MinContinuousReconcileInterval.
	minEvery time.Duration
	// hooks run continuousReconcile.
	hooks extension.ReconcileExtensionHooks
}

func (d *deployer) ExtensionHooks() extension.ReconcileExtensionHooks { return d.hooks }

// ForceReconcile deploys as Reconcile does: every reconcile upgrades.
func (d *deployer) ForceReconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	return d.Reconcile(ctx, req)
}

// Abort has nothing to stop: a Helm operation runs within one call, and
// what it deployed stays until the item is deleted.
func (d *deployer) Abort(context.Context, *lib.Request) (lib.Result, error) { return lib.Done(), nil }
