package lib

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Reasons of self-target errors.
const (
	// ReasonTargetServiceAccountNotFound: the ServiceAccount a self target
	// names does not exist in the Target's namespace.
	ReasonTargetServiceAccountNotFound = "TargetServiceAccountNotFound"
	// ReasonTargetTokenRefused: the API server refused to mint a token for
	// a self target's ServiceAccount.
	ReasonTargetTokenRefused = "TargetTokenRequestRefused"
)

const (
	// DefaultSelfTargetExpirationSeconds is the lifetime of a self target's
	// token when the Target sets no expirationSeconds (as in Landscaper).
	DefaultSelfTargetExpirationSeconds = 24 * 60 * 60
	// selfTokenRenewFraction: a token is renewed once this share of its
	// lifetime has passed, so a client never holds one about to expire.
	selfTokenRenewFraction = 0.8
	// maxSelfTokens bounds the cached tokens (one per ServiceAccount and
	// lifetime): Targets naming many ServiceAccounts must not grow memory forever.
	maxSelfTokens = 256
)

// selfTargetConfig is spec.config.selfConfig.
type selfTargetConfig struct {
	ServiceAccount struct {
		Name string `json:"name"`
	} `json:"serviceAccount"`
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
}

type selfTokenKey struct {
	namespace, name string
	seconds         int64
}

type selfToken struct {
	token   string
	renewAt time.Time
}

// selfTargets makes kubeconfigs for the cluster that holds the Targets (the
// deployer's own), authenticated as a ServiceAccount of the Target's
// namespace with a token minted by the TokenRequest API. Tokens are cached
// and renewed before they expire.
type selfTargets struct {
	own    *rest.Config
	tokens client.Client
	now    func() time.Time

	mu    sync.Mutex
	cache map[selfTokenKey]selfToken
}

func newSelfTargets(own *rest.Config, tokens client.Client) *selfTargets {
	return &selfTargets{own: own, tokens: tokens, now: time.Now, cache: map[selfTokenKey]selfToken{}}
}

// kubeconfig returns the kubeconfig of a self target; field is the
// selfConfig's path, for messages.
func (s *selfTargets) kubeconfig(ctx context.Context, t *lsv1alpha1.Target, cfg selfTargetConfig, field string) ([]byte, error) {
	name := cfg.ServiceAccount.Name
	if name == "" {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.serviceAccount.name must be set", t.Namespace, t.Name, field)
	}
	seconds := int64(DefaultSelfTargetExpirationSeconds)
	if cfg.ExpirationSeconds != nil {
		seconds = *cfg.ExpirationSeconds
	}
	token, err := s.token(ctx, t, selfTokenKey{namespace: t.Namespace, name: name, seconds: seconds}, field)
	if err != nil {
		return nil, err
	}
	return s.render(token)
}

// token returns a cached token that is not due for renewal, or mints one.
func (s *selfTargets) token(ctx context.Context, t *lsv1alpha1.Target, key selfTokenKey, field string) (string, error) {
	s.mu.Lock()
	cached, ok := s.cache[key]
	s.mu.Unlock()
	now := s.now()
	if ok && now.Before(cached.renewAt) {
		return cached.token, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: key.namespace, Name: key.name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &key.seconds}}
	if err := s.tokens.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", tokenRequestError(t, key, field, err)
	}
	// The API server may shorten the lifetime asked for: renew by what it granted.
	lifetime := tr.Status.ExpirationTimestamp.Sub(now)
	if lifetime <= 0 {
		lifetime = time.Duration(key.seconds) * time.Second
	}
	fresh := selfToken{token: tr.Status.Token, renewAt: now.Add(time.Duration(float64(lifetime) * selfTokenRenewFraction))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= maxSelfTokens {
		clear(s.cache)
	}
	s.cache[key] = fresh
	return fresh.token, nil
}

// tokenRequestError says why no token was minted: a missing ServiceAccount
// or a request the API server refuses (e.g. expirationSeconds below its
// minimum of 10 minutes) is the Target's problem; anything else (the
// deployer lacks rights, the API server is busy) may pass and is retried.
func tokenRequestError(t *lsv1alpha1.Target, key selfTokenKey, field string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return ConfigError(ReasonTargetServiceAccountNotFound,
			"Target %s/%s: %s.serviceAccount.name: ServiceAccount %s/%s not found; create it, then retry with the annotation %s: %s",
			t.Namespace, t.Name, field, key.namespace, key.name, lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return ConfigError(ReasonTargetTokenRefused, "Target %s/%s: %s: the API server refused a token for ServiceAccount %s/%s (expirationSeconds %d): %v",
			t.Namespace, t.Name, field, key.namespace, key.name, key.seconds, err)
	}
	return targetTransient(ReasonTargetTokenRefused, err, "Target %s/%s: %s: requesting a token for ServiceAccount %s/%s: %v",
		t.Namespace, t.Name, field, key.namespace, key.name, err)
}

// render writes the kubeconfig of the deployer's own cluster (its server,
// CA and TLS server name) with the ServiceAccount's token as the only
// credential.
func (s *selfTargets) render(token string) ([]byte, error) {
	ca := s.own.CAData
	if len(ca) == 0 && s.own.CAFile != "" {
		// The deployer's own CA file (e.g. the in-cluster one), read here so
		// that the kubeconfig is inline like every other Target's.
		b, err := os.ReadFile(s.own.CAFile)
		if err != nil {
			return nil, TransientError(ReasonInvalidConfig, fmt.Errorf("reading the deployer's own CA file for a self target: %w", err))
		}
		ca = b
	}
	const name = "self"
	server := s.own.Host
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server: server, CertificateAuthorityData: ca,
			TLSServerName: s.own.ServerName, InsecureSkipTLSVerify: s.own.Insecure,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
	return clientcmd.Write(kc)
}
