package helm

import (
	"context"
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// The Secrets a Target names are read uncached, on use; self targets mint
// tokens of ServiceAccounts in the Target's namespace.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

const (
	// maxTargetClients bounds the cached target connections: rotating
	// credentials must not grow memory forever.
	maxTargetClients = 256
	// ReasonUnreachable: the Target's cluster did not answer.
	ReasonUnreachable = lib.ReasonTargetUnreachable
)

// targetClients keeps one guarded connection per distinct kubeconfig, so
// that discovery is reused across reconciles and items.
type targetClients struct {
	mu       sync.Mutex
	getters  map[[32]byte]*targetGetter
	resolver *lib.TargetResolver
}

// newTargetClients resolves Targets with mgr's uncached reader (Secrets),
// its own configuration (self targets) and guard's bounds.
func newTargetClients(mgr ctrl.Manager, guard lib.TargetClientOptions) *targetClients {
	return &targetClients{resolver: lib.NewTargetResolver(lib.TargetResolverOptions{
		Secrets: mgr.GetAPIReader(), Guard: guard, Self: mgr.GetConfig(), Tokens: mgr.GetClient(),
	})}
}

// targetGetter gives Helm the clients of one target cluster
// (genericclioptions.RESTClientGetter).
type targetGetter struct {
	// cfg carries one transport (sharedTransport) that every client of the
	// target is built on.
	cfg       *rest.Config
	core      corev1client.CoreV1Interface
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
	// version is the target's Kubernetes version, read once in a while.
	version serverVersion
}

func (g *targetGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *targetGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *targetGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

// ToRawKubeConfigLoader is asked only for a default namespace; Helm's
// client always gets the release namespace set explicitly.
func (g *targetGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(clientcmdapi.Config{}, &clientcmd.ConfigOverrides{})
}

// forTarget returns the getter of the cluster a Target points at.
func (tc *targetClients) forTarget(ctx context.Context, t *lsv1alpha1.Target) (*targetGetter, error) {
	kc, err := tc.resolver.Kubeconfig(ctx, t)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(kc.Data)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if g, ok := tc.getters[key]; ok {
		return g, nil
	}
	cfg, err := tc.resolver.RESTConfig(ctx, t, kc)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "terrace-helm-deployer"
	cfg.QPS, cfg.Burst = 50, 100
	g, err := newTargetGetter(cfg)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: %v", t.Namespace, t.Name, err)
	}
	if tc.getters == nil || len(tc.getters) >= maxTargetClients {
		tc.getters = map[[32]byte]*targetGetter{}
	}
	tc.getters[key] = g
	return g, nil
}

func newTargetGetter(cfg *rest.Config) (*targetGetter, error) {
	shared, err := sharedTransport(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(shared)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(shared)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	return &targetGetter{cfg: shared, core: core, discovery: cached, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}, nil
}

// sharedTransport turns cfg's TLS settings, credentials, dialer and wrappers
// into one transport, so that every client built from the returned config
// shares its connections. Helm builds new clients for every operation, and
// client-go cannot reuse a cached transport for a config with its own dialer
// (the Target guard's): each operation would open connections of its own
// and keep them idle.
func sharedTransport(cfg *rest.Config) (*rest.Config, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:                      cfg.Host,
		APIPath:                   cfg.APIPath,
		ContentConfig:             cfg.ContentConfig,
		UserAgent:                 cfg.UserAgent,
		QPS:                       cfg.QPS,
		Burst:                     cfg.Burst,
		RateLimiter:               cfg.RateLimiter,
		WarningHandler:            cfg.WarningHandler,
		WarningHandlerWithContext: cfg.WarningHandlerWithContext,
		Timeout:                   cfg.Timeout,
		Transport:                 rt,
	}, nil
}
