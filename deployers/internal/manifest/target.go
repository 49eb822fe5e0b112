package manifest

import (
	"context"
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// The Secrets a Target names are read uncached, on use; self targets mint
// tokens of ServiceAccounts in the Target's namespace.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// maxTargetClients bounds the cached target connections: rotating
// credentials must not grow memory forever.
const maxTargetClients = 256

// targetClients keeps one client per distinct kubeconfig, so that REST
// mapping (discovery) and connections are reused across reconciles and items.
type targetClients struct {
	mu       sync.Mutex
	clients  map[[32]byte]*clusterClient
	resolver *lib.TargetResolver
}

// newTargetClients resolves Targets with mgr's uncached reader (Secrets),
// its own configuration (self targets) and guard's bounds.
func newTargetClients(mgr ctrl.Manager, guard lib.TargetClientOptions) *targetClients {
	return &targetClients{resolver: lib.NewTargetResolver(lib.TargetResolverOptions{
		Secrets: mgr.GetAPIReader(), Guard: guard, Self: mgr.GetConfig(), Tokens: mgr.GetClient(),
	})}
}

type clusterClient struct {
	client.Client
	mapper meta.RESTMapper
}

// forTarget returns a client for the cluster a Target points at.
func (tc *targetClients) forTarget(ctx context.Context, t *lsv1alpha1.Target) (*clusterClient, error) {
	kc, err := tc.resolver.Kubeconfig(ctx, t)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(kc.Data)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c, ok := tc.clients[key]; ok {
		return c, nil
	}
	cfg, err := tc.resolver.RESTConfig(ctx, t, kc)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "terrace-manifest-deployer"
	cfg.QPS, cfg.Burst = 50, 100
	c, err := newClusterClient(cfg)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: %v", t.Namespace, t.Name, err)
	}
	if tc.clients == nil || len(tc.clients) >= maxTargetClients {
		tc.clients = map[[32]byte]*clusterClient{}
	}
	tc.clients[key] = c
	return c, nil
}

func newClusterClient(cfg *rest.Config) (*clusterClient, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	// The mapper discovers lazily, so building a client needs no round trip
	// (an unreachable cluster shows up when objects are applied).
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper, Scheme: runtime.NewScheme()})
	if err != nil {
		return nil, err
	}
	return &clusterClient{Client: c, mapper: mapper}, nil
}
