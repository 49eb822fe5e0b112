// Package controller wires the spacerequest-stub's reconcilers into a
// controller-runtime manager; the binary and tests call AddToManager.
package controller

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// Component is the binary's name, used for the event recorder.
const Component = "spacerequest-stub"

// Options are the spacerequest-stub's own settings. The zero value means the
// defaults.
type Options struct {
	// TargetClusterURL is the API server URL written into kubeconfigs and
	// status.targetClusterURL; empty means the API server the stub talks to.
	TargetClusterURL string
	// TerminationTimeout is how long a deleted SpaceRequest may stay
	// Terminating before it reports UnableToTerminate; 0 means 2m.
	TerminationTimeout time.Duration
	// TokenExpiration is the lifetime requested for kubeconfig tokens;
	// 0 means one year. Tokens are renewed at 80% of their lifetime.
	TokenExpiration time.Duration
	// MaxNamespaceCPU, MaxNamespaceMemory, MaxNamespacePods and
	// MaxNamespaceStorage bound the ResourceQuota a SpaceRequest may ask
	// for; zero means spacerequest.DefaultCeilings.
	MaxNamespaceCPU, MaxNamespaceMemory, MaxNamespacePods, MaxNamespaceStorage resource.Quantity
}

// ceilings are the options' ceilings, defaults for the zero ones.
func (o *Options) ceilings() spacerequest.Ceilings {
	c := spacerequest.DefaultCeilings()
	for _, f := range []struct{ set, into *resource.Quantity }{
		{&o.MaxNamespaceCPU, &c.CPU}, {&o.MaxNamespaceMemory, &c.Memory},
		{&o.MaxNamespacePods, &c.Pods}, {&o.MaxNamespaceStorage, &c.Storage},
	} {
		if !f.set.IsZero() {
			*f.into = f.set.DeepCopy()
		}
	}
	return c
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.TargetClusterURL, "target-cluster-url", o.TargetClusterURL,
		"API server URL written into kubeconfigs and SpaceRequest status.targetClusterURL (default: the API server this process talks to).")
	fs.DurationVar(&o.TerminationTimeout, "termination-timeout", orDefault(o.TerminationTimeout, spacerequest.DefaultTerminationTimeout),
		"How long a deleted SpaceRequest may stay Terminating before its Ready condition says UnableToTerminate.")
	fs.DurationVar(&o.TokenExpiration, "token-expiration", orDefault(o.TokenExpiration, spacerequest.DefaultTokenExpiration),
		"Lifetime requested for kubeconfig tokens (TokenRequest API, at least 10m); they are renewed at 80% of the granted lifetime.")
	c := o.ceilings()
	for _, f := range []struct {
		into       *resource.Quantity
		def        resource.Quantity
		name, what string
	}{
		{&o.MaxNamespaceCPU, c.CPU, spacerequest.FlagMaxNamespaceCPU, "CPU (requests.cpu and limits.cpu)"},
		{&o.MaxNamespaceMemory, c.Memory, spacerequest.FlagMaxNamespaceMemory, "memory (requests.memory and limits.memory)"},
		{&o.MaxNamespacePods, c.Pods, spacerequest.FlagMaxNamespacePods, "pods"},
		{&o.MaxNamespaceStorage, c.Storage, spacerequest.FlagMaxNamespaceStorage, "storage (requests.storage)"},
	} {
		*f.into = f.def
		fs.Var(quantityFlag{f.into}, f.name, "Most "+f.what+" the ResourceQuota of one provisioned namespace may grant; a SpaceRequest asking for more is refused.")
	}
}

// quantityFlag is a resource.Quantity as a pflag value.
type quantityFlag struct{ q *resource.Quantity }

func (f quantityFlag) String() string {
	if f.q == nil {
		return ""
	}
	return f.q.String()
}
func (f quantityFlag) Type() string { return "quantity" }
func (f quantityFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("must be positive, got %s", s)
	}
	*f.q = q
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// AddToManager registers the spacerequest-stub's reconciler with mgr.
func AddToManager(mgr ctrl.Manager, o Options) error {
	_, err := Setup(mgr, o)
	return err
}

// Setup is AddToManager, returning the registered reconciler (tests look
// into its caches).
func Setup(mgr ctrl.Manager, o Options) (*spacerequest.Reconciler, error) {
	if mgr == nil {
		return nil, errors.New("spacerequest-stub: manager is nil")
	}
	cfg := mgr.GetConfig()
	url := o.TargetClusterURL
	if url == "" {
		url = cfg.Host
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("spacerequest-stub: reading the API server's CA bundle: %w", err)
		}
		ca = data
	}
	roles, managed, err := addCaches(mgr)
	if err != nil {
		return nil, err
	}
	r := &spacerequest.Reconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		RoleReader:         roles,
		Managed:            managed,
		Recorder:           status.BoundedRecorder(mgr.GetEventRecorder(Component)),
		TargetClusterURL:   url,
		CAData:             ca,
		Insecure:           cfg.Insecure,
		TerminationTimeout: orDefault(o.TerminationTimeout, spacerequest.DefaultTerminationTimeout),
		TokenExpiration:    orDefault(o.TokenExpiration, spacerequest.DefaultTokenExpiration),
		Ceilings:           o.ceilings(),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("spacerequest-stub: %w", err)
	}
	return r, nil
}

// addCaches adds to mgr the stub's two caches: one of the edit ClusterRole
// alone (list/watch with a field selector on its name, which its
// resourceNames-restricted RBAC allows), and one of the metadata of what
// the stub made.
func addCaches(mgr ctrl.Manager) (roles, managed cache.Cache, err error) {
	cfg := mgr.GetConfig()
	roles, err = cache.New(cfg, cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&rbacv1.ClusterRole{}: {Field: fields.OneTermEqualSelector("metadata.name", spacerequest.EditClusterRole)},
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("spacerequest-stub: creating the ClusterRole cache: %w", err)
	}
	// A cache of the metadata of what the stub made (namespaces,
	// ServiceAccounts, RoleBindings, Secrets carrying its label), and nothing
	// else: the manager's cache would list every such object in the cluster.
	// The reconciler must never read these kinds through the manager's
	// client, which would start an unfiltered informer for them.
	managedOpts := spacerequest.ManagedCacheOptions()
	managedOpts.Scheme, managedOpts.Mapper, managedOpts.HTTPClient = mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient()
	managed, err = cache.New(cfg, managedOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("spacerequest-stub: creating the cache of provisioned objects: %w", err)
	}
	for name, c := range map[string]cache.Cache{"clusterrole-cache": roles, "provisioned-objects-cache": managed} {
		if err := manager.AddCache(mgr, name, c); err != nil {
			return nil, nil, fmt.Errorf("spacerequest-stub: %w", err)
		}
	}
	return roles, managed, nil
}
