package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Type is the deploy-item type the mock deployer serves.
const Type = lsv1alpha1.MockDeployItemType

// DefaultName is the deployer name used when Options.Name is empty.
const DefaultName = "mock-deployer"

// ExportKey is the key of the export Secret holding the export (JSON).
const ExportKey = lib.ExportKey

// ReasonMockFailed is lastError.reason of an item whose configuration asks for phase Failed.
const ReasonMockFailed = "MockFailed"

// Options configure the mock deployer. The zero value is usable: a deployer
// named "mock-deployer" serving every mock item.
type Options struct {
	// Name is the deployer's name (status.deployer.name, controller name,
	// field manager); default "mock-deployer". Two mock deployers in one
	// manager need distinct names.
	Name string
	// Identity is status.deployer.identity; default Name.
	Identity string
	// Version is status.deployer.version.
	Version string
	// TargetSelector restricts the items served to those whose Target
	// matches; default: all.
	TargetSelector lib.TargetSelector
	// DefaultTimeout bounds retries of a job whose item has no spec.timeout (default 10m; see lib.Options).
	DefaultTimeout timeout.Timeout
	// CallTimeout bounds each call of the deployer (see lib.Options).
	CallTimeout time.Duration
	// Namespaces restricts the deploy items served to these namespaces
	// (default: all). Set it when the manager's cache is restricted to
	// namespaces (e.g. one manager per test namespace): the deployer watches
	// items with an informer of its own.
	Namespaces []string
	// Hooks are extension hooks to register (optional).
	Hooks extension.ReconcileExtensionHooks
	// MinContinuousReconcileInterval is the most frequent
	// spec.config.continuousReconcile an item may ask for (default
	// DefaultMinContinuousReconcileInterval); a more frequent one fails the
	// item (--min-continuous-reconcile-interval).
	MinContinuousReconcileInterval time.Duration
}

// DefaultMinContinuousReconcileInterval is the default of
// Options.MinContinuousReconcileInterval, the manifest deployer's.
const DefaultMinContinuousReconcileInterval = manifest.DefaultMinContinuousReconcileInterval

// BindFlags registers the mock deployer's own flags on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	if o.MinContinuousReconcileInterval <= 0 {
		o.MinContinuousReconcileInterval = DefaultMinContinuousReconcileInterval
	}
	fs.DurationVar(&o.MinContinuousReconcileInterval, "min-continuous-reconcile-interval", o.MinContinuousReconcileInterval,
		"The most frequent spec.config.continuousReconcile (every, or the shortest gap of cron) a mock deploy item may ask for; a more frequent one fails the item.")
}

// AddToManager registers the mock deployer controller with mgr.
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
	d := &deployer{client: mgr.GetClient(), fieldOwner: opts.Name, hooks: hooks, minEvery: opts.MinContinuousReconcileInterval}
	return lib.AddToManager(mgr, d, lib.Options{
		Type:           Type,
		Name:           opts.Name,
		Identity:       opts.Identity,
		Version:        opts.Version,
		TargetSelector: opts.TargetSelector,
		DefaultTimeout: opts.DefaultTimeout,
		CallTimeout:    opts.CallTimeout,
		Namespaces:     opts.Namespaces,
	})
}

type deployer struct {
	client     client.Client
	fieldOwner string
	hooks      extension.ReconcileExtensionHooks
	// minEvery is Options.MinContinuousReconcileInterval.
	minEvery time.Duration
}

func (d *deployer) ExtensionHooks() extension.ReconcileExtensionHooks { return d.hooks }

// ParseConfig decodes a mock provider configuration strictly.
func ParseConfig(raw []byte) (*mockv1alpha1.ProviderConfiguration, error) {
	cfg := &mockv1alpha1.ProviderConfiguration{}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: not a valid mock ProviderConfiguration: %v", err)
	}
	if gv := mockv1alpha1.SchemeGroupVersion.String(); cfg.APIVersion != "" && (cfg.APIVersion != gv || cfg.Kind != "ProviderConfiguration") {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config: apiVersion/kind %s/%s is not %s/ProviderConfiguration", cfg.APIVersion, cfg.Kind, gv)
	}
	for _, f := range []struct{ field, phase string }{{"phase", cfg.Phase}, {"initialPhase", cfg.InitialPhase}} {
		switch lsv1alpha1.Phase(f.phase) {
		case "", lsv1alpha1.PhaseSucceeded, lsv1alpha1.PhaseFailed, lsv1alpha1.PhaseProgressing:
		default:
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.%s: %q is not one of Succeeded, Failed, Progressing", f.field, f.phase)
		}
	}
	if cfg.Delay != nil && cfg.Delay.Duration < 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.delay: %s is negative", cfg.Delay.Duration)
	}
	if _, err := continuousSchedule(cfg.ContinuousReconcile); err != nil {
		return nil, err
	}
	return cfg, nil
}

// outcome is the phase a job ends in: phase, else initialPhase, else
// Succeeded; and the field that asked for it, for messages.
func outcome(cfg *mockv1alpha1.ProviderConfiguration) (lsv1alpha1.Phase, string) {
	switch {
	case cfg.Phase != "":
		return lsv1alpha1.Phase(cfg.Phase), "spec.config.phase"
	case cfg.InitialPhase != "":
		return lsv1alpha1.Phase(cfg.InitialPhase), "spec.config.initialPhase"
	}
	return lsv1alpha1.PhaseSucceeded, ""
}

func (d *deployer) Reconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	di := req.Item
	var raw []byte
	if di.Spec.Config != nil {
		raw = di.Spec.Config.Raw
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return lib.Result{}, err
	}
	if err := checkContinuous(cfg.ContinuousReconcile, d.minEvery); err != nil {
		return lib.Result{}, err
	}
	if cfg.Delay != nil && cfg.Delay.Duration > 0 && di.Status.LastReconcileTime != nil {
		if left := time.Until(di.Status.LastReconcileTime.Add(cfg.Delay.Duration)); left > 0 {
			return lib.PendingFor(left, fmt.Sprintf("mock delay: %s left", left.Round(time.Millisecond))), nil
		}
	}
	if cfg.ProviderStatus != nil {
		di.Status.ProviderStatus = cfg.ProviderStatus.DeepCopy()
	}
	if cfg.Export != nil {
		if err := lib.WriteExport(ctx, d.client, d.fieldOwner, di, cfg.Export.Raw); err != nil {
			return lib.Result{}, err
		}
	} else if err := lib.ClearExport(ctx, d.client, di); err != nil {
		return lib.Result{}, err
	}
	switch p, field := outcome(cfg); p {
	case lsv1alpha1.PhaseFailed:
		return lib.Result{}, lib.ConfigError(ReasonMockFailed, "%s: the mock configuration asks for phase Failed", field)
	case lsv1alpha1.PhaseProgressing:
		// Stays running until aborted; no requeue: nothing will change by itself.
		return lib.PendingFor(0, fmt.Sprintf("mock configuration (%s) keeps the item Progressing", field)), nil
	}
	return lib.Done(), nil
}

func (d *deployer) Delete(ctx context.Context, req *lib.Request) (lib.Result, error) {
	if err := lib.DeleteExport(ctx, d.client, req.Item); err != nil {
		return lib.Result{}, err
	}
	return lib.Done(), nil
}

// Abort has nothing to clean up: the mock changes nothing outside the item.
func (d *deployer) Abort(context.Context, *lib.Request) (lib.Result, error) { return lib.Done(), nil }

func (d *deployer) ForceReconcile(ctx context.Context, req *lib.Request) (lib.Result, error) {
	return d.Reconcile(ctx, req)
}
