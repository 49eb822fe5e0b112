package helm

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// The kubeconfig Secret a Target names is read uncached, on use.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

const (
	defaultKubeconfigKey = "kubeconfig"
	// maxTargetClients bounds the cached target connections: rotating
	// credentials must not grow memory forever.
	maxTargetClients = 256
	// ReasonUnreachable: the Target's cluster did not answer.
	ReasonUnreachable = "TargetUnreachable"
)

// targetClients keeps one guarded connection per distinct kubeconfig, so
// that discovery is reused across reconciles and items.
type targetClients struct {
	mu      sync.Mutex
	getters map[[32]byte]*targetGetter
	reader  client.Reader
	guard   lib.TargetClientOptions
}

// targetGetter gives Helm the clients of one target cluster
// (genericclioptions.RESTClientGetter).
type targetGetter struct {
	cfg       *rest.Config
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
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
	kc, err := tc.kubeconfig(ctx, t)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(kc)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if g, ok := tc.getters[key]; ok {
		return g, nil
	}
	cfg, err := restConfigFromKubeconfig(kc)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: the kubeconfig is invalid: %v", t.Namespace, t.Name, err)
	}
	if err := tc.guard.Guard(ctx, cfg); err != nil {
		var refused *lib.AddressRefusedError
		if errors.As(err, &refused) {
			return nil, lib.ConfigError(lib.ReasonTargetAddressRefused, "Target %s/%s: %s", t.Namespace, t.Name, refused.Message)
		}
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("target %s/%s: %w", t.Namespace, t.Name, err))
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

// kubeconfig returns the kubeconfig of a kubernetes-cluster Target: from
// the Secret its spec.secretRef names, or inline in spec.config.kubeconfig.
func (tc *targetClients) kubeconfig(ctx context.Context, t *lsv1alpha1.Target) ([]byte, error) {
	if t == nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.target: a helm deploy item needs a Target of type %s", lsv1alpha1.KubernetesClusterTargetType)
	}
	if ref := t.Spec.SecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = defaultKubeconfigKey
		}
		s := &corev1.Secret{}
		if err := tc.reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: ref.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, lib.ConfigError(lib.ReasonTargetSecretNotFound,
					"Target %s/%s: spec.secretRef: Secret %s not found; create it, then retry with the annotation %s: %s",
					t.Namespace, t.Name, ref.Name, lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
			}
			return nil, lib.TransientError("TargetSecretUnreadable", fmt.Errorf("reading Secret %s/%s of Target %s: %w", t.Namespace, ref.Name, t.Name, err))
		}
		if kc := s.Data[key]; len(kc) > 0 {
			return kc, nil
		}
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: spec.secretRef: Secret %s has no key %q", t.Namespace, t.Name, ref.Name, key)
	}
	var cfg struct {
		Kubeconfig json.RawMessage `json:"kubeconfig"`
	}
	if t.Spec.Config == nil || json.Unmarshal(t.Spec.Config.RawMessage, &cfg) != nil || len(cfg.Kubeconfig) == 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: spec.config.kubeconfig or spec.secretRef must be set", t.Namespace, t.Name)
	}
	var s string
	if err := json.Unmarshal(cfg.Kubeconfig, &s); err == nil {
		return []byte(s), nil
	}
	return cfg.Kubeconfig, nil
}

// restConfigFromKubeconfig builds a client configuration from a Target's
// kubeconfig with inline credentials only: a Target is a tenant's, and a
// kubeconfig naming files or plugins would make the deployer read its own
// files or run commands. No defaults are merged in (no in-cluster
// fallback): an empty server is an error.
func restConfigFromKubeconfig(kc []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	for name, u := range raw.AuthInfos {
		if u != nil && (u.TokenFile != "" || u.ClientCertificate != "" || u.ClientKey != "" || u.Exec != nil || u.AuthProvider != nil) {
			return nil, fmt.Errorf("user %q refers to local files or plugins; only inline credentials are allowed", name)
		}
	}
	for name, c := range raw.Clusters {
		if c != nil && c.CertificateAuthority != "" {
			return nil, fmt.Errorf("cluster %q: certificate-authority is a local file; use certificate-authority-data", name)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Host == "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return nil, errors.New("the kubeconfig names no server, or refers to local files or plugins")
	}
	return cfg, nil
}
