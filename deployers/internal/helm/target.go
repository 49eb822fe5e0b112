package helm

import (
	"context"
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
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
	cfg       *rest.Config
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
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: %v", t.Namespace, t.Name, err)
	}
	cached := memory.NewMemCacheClient(dc)
	g := &targetGetter{cfg: cfg, discovery: cached, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}
	if tc.getters == nil || len(tc.getters) >= maxTargetClients {
		tc.getters = map[[32]byte]*targetGetter{}
	}
	tc.getters[key] = g
	return g, nil
}
