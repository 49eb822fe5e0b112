package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// The kubeconfig Secret a Target names is read uncached, on use.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// defaultKubeconfigKey is the Secret key read when a Target's secretRef names none.
const defaultKubeconfigKey = "kubeconfig"

// targetClients keeps one client per distinct kubeconfig, so that REST
// mapping (discovery) and connections are reused across reconciles and items.
type targetClients struct {
	mu      sync.Mutex
	clients map[[32]byte]client.Client
	// reader reads Secrets uncached: caching every Secret of the cluster
	// would cost memory and need list/watch on Secrets.
	reader client.Reader
	// guard bounds every connection to a target (lib.TargetClientOptions).
	guard lib.TargetClientOptions
}

type clusterClient struct {
	client.Client
	mapper meta.RESTMapper
}

// kubeconfig returns the kubeconfig of a kubernetes-cluster Target.
func (tc *targetClients) kubeconfig(ctx context.Context, t *lsv1alpha1.Target) ([]byte, error) {
	if t.Spec.SecretRef != nil {
		key := t.Spec.SecretRef.Key
		if key == "" {
			key = defaultKubeconfigKey
		}
		s := &corev1.Secret{}
		if err := tc.reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.SecretRef.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				// Its own reason: the Target is there, its credentials are not.
				// The deployer does not watch Secrets (it reads them uncached, on
				// use), so creating the Secret later does not wake the item: the
				// message says how to retry.
				return nil, lib.ConfigError(lib.ReasonTargetSecretNotFound,
					"Target %s/%s: spec.secretRef: Secret %s not found; create it, then retry with the annotation %s: %s (or let the next job of the item's execution pick it up)",
					t.Namespace, t.Name, t.Spec.SecretRef.Name, lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
			}
			return nil, lib.TransientError("TargetSecretUnreadable", fmt.Errorf("reading Secret %s/%s of Target %s: %w", t.Namespace, t.Spec.SecretRef.Name, t.Name, err))
		}
		kc, ok := s.Data[key]
		if !ok || len(kc) == 0 {
			return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: spec.secretRef: Secret %s has no key %q", t.Namespace, t.Name, s.Name, key)
		}
		return kc, nil
	}
	if t.Spec.Config == nil || len(t.Spec.Config.RawMessage) == 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: spec.config.kubeconfig or spec.secretRef must be set", t.Namespace, t.Name)
	}
	var cfg struct {
		Kubeconfig json.RawMessage `json:"kubeconfig"`
	}
	if err := json.Unmarshal(t.Spec.Config.RawMessage, &cfg); err != nil || len(cfg.Kubeconfig) == 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: spec.config.kubeconfig must be set", t.Namespace, t.Name)
	}
	// The kubeconfig is a string of YAML, or (accepted too) the object itself.
	var s string
	if err := json.Unmarshal(cfg.Kubeconfig, &s); err == nil {
		return []byte(s), nil
	}
	return cfg.Kubeconfig, nil
}

// forTarget returns a client for the cluster a Target points at.
func (tc *targetClients) forTarget(ctx context.Context, t *lsv1alpha1.Target) (*clusterClient, error) {
	kc, err := tc.kubeconfig(ctx, t)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(kc)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c, ok := tc.clients[key]; ok {
		return c.(*clusterClient), nil
	}
	cfg, err := restConfigFromTargetKubeconfig(kc)
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
	cfg.UserAgent = "terrace-manifest-deployer"
	cfg.QPS, cfg.Burst = 50, 100
	c, err := newClusterClient(cfg)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "Target %s/%s: %v", t.Namespace, t.Name, err)
	}
	if tc.clients == nil {
		tc.clients = map[[32]byte]client.Client{}
	}
	if len(tc.clients) > 256 {
		// A bound, not an LRU: rotating credentials must not grow memory forever.
		clear(tc.clients)
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

// restConfigFromTargetKubeconfig builds a rest.Config from a Target's
// kubeconfig using only what the kubeconfig itself contains. A Target is
// written by whoever may create Targets, but the client runs inside the
// deployer: a kubeconfig that names a file (tokenFile, client-certificate,
// client-key, certificate-authority), an exec plugin or an auth-provider would
// make client-go read the deployer's own files or run commands as the
// deployer — e.g. tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
// sends the deployer's own token to whatever server the Target names. So such
// kubeconfigs are refused before client-go sees them (its validation already
// opens the files). All users and clusters are checked, not only the current
// context's: that is simpler to reason about and leaves nothing to get wrong.
//
// The client config is built directly from the parsed kubeconfig with empty
// overrides: no KUBECONFIG merge, no KUBERNETES_MASTER default, no in-cluster
// fallback. An empty server is an error, never the deployer's own API server.
func restConfigFromTargetKubeconfig(kc []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	if err := checkInlineOnly(raw); err != nil {
		return nil, err
	}
	if raw.CurrentContext == "" {
		return nil, errors.New("current-context is not set")
	}
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("current-context %q: no such context", raw.CurrentContext)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, fmt.Errorf("context %q: cluster %q not found", raw.CurrentContext, kctx.Cluster)
	}
	if cluster.Server == "" {
		return nil, fmt.Errorf("context %q: cluster %q: server is empty (the deployer never falls back to its own cluster)", raw.CurrentContext, kctx.Cluster)
	}
	if kctx.AuthInfo != "" {
		if _, ok := raw.AuthInfos[kctx.AuthInfo]; !ok {
			return nil, fmt.Errorf("context %q: user %q not found", raw.CurrentContext, kctx.AuthInfo)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// Defence in depth: whatever client-go adds in future, a client for a
	// Target must not reference the deployer's files or run plugins.
	if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" ||
		cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Host == "" {
		return nil, errors.New("the kubeconfig refers to local files, plugins or no server")
	}
	return cfg, nil
}

// checkInlineOnly refuses every user and cluster that refers to local files,
// exec plugins or auth-provider plugins, naming the first offending field in
// a stable (sorted) order.
func checkInlineOnly(raw *clientcmdapi.Config) error {
	const inlineHint = "only inline credentials are allowed (token, client-certificate-data, client-key-data, username/password, certificate-authority-data)"
	for _, name := range slices.Sorted(maps.Keys(raw.AuthInfos)) {
		u := raw.AuthInfos[name]
		if u == nil {
			continue
		}
		var field string
		switch {
		case u.TokenFile != "":
			field = "tokenFile"
		case u.ClientCertificate != "":
			field = "client-certificate"
		case u.ClientKey != "":
			field = "client-key"
		case u.Exec != nil:
			field = "exec"
		case u.AuthProvider != nil:
			field = "auth-provider"
		default:
			continue
		}
		return fmt.Errorf("user %q: %s is not allowed (it would make the deployer use its own files or run plugins); %s", name, field, inlineHint)
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Clusters)) {
		c := raw.Clusters[name]
		if c != nil && c.CertificateAuthority != "" {
			return fmt.Errorf("cluster %q: certificate-authority is not allowed (a file on the deployer's disk); use certificate-authority-data", name)
		}
	}
	return nil
}
