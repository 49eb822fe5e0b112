package helm

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/stale"
)

// The deployer reads Contexts through its informer cache (list, watch), and
// a Context the cache does not hold yet from the API server (get).
//
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=contexts,verbs=get;list;watch

// ReasonChartCredentials: a credential the item's Context names is missing
// or unusable.
const ReasonChartCredentials = "ChartCredentialsInvalid"

// authHeaderKey is the key of a chart repository credential Secret when
// the secretRef names none.
const authHeaderKey = "authHeader"

// itemCredentials are the credentials of one item: from its Context, read
// only in the item's namespace.
type itemCredentials struct {
	namespace string
	// context is "<namespace>/<name>" of the Context ("" without one), for errors.
	context string
	// repoAuths are the Context's helmChartRepoCredentials.
	repoAuths []helmv1alpha1.Auth
	// pullSecrets name kubernetes.io/dockerconfigjson Secrets with registry credentials.
	pullSecrets []string
	// repositoryContext is the Context's: where a component reference that
	// names none is read from.
	repositoryContext *lsv1alpha1.RepositoryContext
	secrets           client.Reader
}

// repoAuth is what a request to one chart repository URL carries.
type repoAuth struct {
	header  string
	rootCAs *x509.CertPool
	// fingerprint tells credentials apart in cache keys ("" without any).
	fingerprint string
}

// credentialsOf reads the item's Context. A Context named "default" (or
// none) that does not exist means no credentials.
func (cs *chartSource) credentialsOf(ctx context.Context, di *lsv1alpha1.DeployItem) (*itemCredentials, error) {
	if cs.contexts == nil {
		return cs.credentialsFrom(di.Namespace, nil)
	}
	lsCtx, err := cs.readContext(ctx, di)
	if err != nil {
		return nil, err
	}
	return cs.credentialsFrom(di.Namespace, lsCtx)
}

// liveDefaultCredentials are the credentials of the namespace's default
// Context read from the API server: an item about to fail for want of
// what the Context gives confirms that the cache, which may lag behind,
// did not miss it.
func (cs *chartSource) liveDefaultCredentials(ctx context.Context, namespace string) (*itemCredentials, error) {
	lsCtx, err := defaultContext(ctx, cs.secrets, namespace)
	if err != nil {
		return nil, err
	}
	return cs.credentialsFrom(namespace, lsCtx)
}

// credentialsFrom are the credentials lsCtx (nil: none) gives an item in
// namespace.
func (cs *chartSource) credentialsFrom(namespace string, lsCtx *lsv1alpha1.Context) (*itemCredentials, error) {
	creds := &itemCredentials{namespace: namespace, secrets: cs.secrets}
	if lsCtx == nil {
		return creds, nil
	}
	creds.context = client.ObjectKeyFromObject(lsCtx).String()
	creds.repositoryContext = lsCtx.RepositoryContext
	for _, ref := range lsCtx.RegistryPullSecrets {
		creds.pullSecrets = append(creds.pullSecrets, ref.Name)
	}
	raw, ok := lsCtx.Configurations[helmv1alpha1.HelmChartRepoCredentialsKey]
	if !ok {
		return creds, nil
	}
	var repoCreds helmv1alpha1.HelmChartRepoCredentials
	if err := json.Unmarshal(raw.RawMessage, &repoCreds); err != nil {
		return nil, lib.ConfigError(ReasonChartCredentials, "Context %s configurations.%s: %v", creds.context, helmv1alpha1.HelmChartRepoCredentialsKey, err)
	}
	creds.repoAuths = repoCreds.Auths
	return creds, nil
}

// readContext reads the item's Context from the cache (nil: none). A
// Context the item names is asked of the API server before it counts as
// missing, as it may be newer than the cache. The default Context is
// optional and most namespaces have none: its absence from the cache is
// taken as is, so an item without a Context costs no request.
func (cs *chartSource) readContext(ctx context.Context, di *lsv1alpha1.DeployItem) (*lsv1alpha1.Context, error) {
	if di.Spec.Context == "" || di.Spec.Context == lsv1alpha1.DefaultContextName {
		return defaultContext(ctx, cs.contexts, di.Namespace)
	}
	key := types.NamespacedName{Namespace: di.Namespace, Name: di.Spec.Context}
	lsCtx := &lsv1alpha1.Context{}
	if err := stale.Get(ctx, cs.contexts, cs.secrets, key, lsCtx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, lib.ConfigError(lib.ReasonContextNotFound, "spec.context: Context %s not found", key)
		}
		return nil, fmt.Errorf("reading Context %s: %w", key, err)
	}
	return lsCtx, nil
}

// defaultContext reads the namespace's default Context from r (nil: none).
func defaultContext(ctx context.Context, r client.Reader, namespace string) (*lsv1alpha1.Context, error) {
	key := types.NamespacedName{Namespace: namespace, Name: lsv1alpha1.DefaultContextName}
	lsCtx := &lsv1alpha1.Context{}
	if err := r.Get(ctx, key, lsCtx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Context %s: %w", key, err)
	}
	return lsCtx, nil
}

// repoAuthFor returns the credentials of the auth entry whose url is the
// longest prefix of u (scheme ignored), or none.
func (c *itemCredentials) repoAuthFor(ctx context.Context, u *url.URL) (*repoAuth, error) {
	target := schemeless(u.String())
	best := -1
	for i, a := range c.repoAuths {
		prefix := schemeless(a.URL)
		if underPrefix(target, prefix) && (best < 0 || len(prefix) > len(schemeless(c.repoAuths[best].URL))) {
			best = i
		}
	}
	if best < 0 {
		return &repoAuth{}, nil
	}
	a := c.repoAuths[best]
	field := fmt.Sprintf("Context %s configurations.%s.auths[%d]", c.context, helmv1alpha1.HelmChartRepoCredentialsKey, best)
	out := &repoAuth{header: a.AuthHeader}
	if a.SecretRef != nil {
		header, err := c.secretValue(ctx, field+".secretRef", a.SecretRef)
		if err != nil {
			return nil, err
		}
		out.header = header
	}
	if a.CustomCAData != "" {
		pem, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a.CustomCAData))
		if err != nil {
			return nil, lib.ConfigError(ReasonChartCredentials, "%s.customCAData: not base64: %v", field, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, lib.ConfigError(ReasonChartCredentials, "%s.customCAData: no PEM certificate in it", field)
		}
		out.rootCAs = pool
	}
	sum := sha256.Sum256([]byte(out.header + "\x00" + a.CustomCAData))
	out.fingerprint = hex.EncodeToString(sum[:8])
	return out, nil
}

// secretValue reads the key of a Secret in the item's namespace.
func (c *itemCredentials) secretValue(ctx context.Context, field string, ref *lsv1alpha1.LocalSecretReference) (string, error) {
	key := ref.Key
	if key == "" {
		key = authHeaderKey
	}
	s, err := c.secret(ctx, field, ref.Name)
	if err != nil {
		return "", err
	}
	v, ok := s.Data[key]
	if !ok {
		return "", lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s has no key %q", field, c.namespace, ref.Name, key)
	}
	return strings.TrimSpace(string(v)), nil
}

func (c *itemCredentials) secret(ctx context.Context, field, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := c.secrets.Get(ctx, types.NamespacedName{Namespace: c.namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s not found", field, c.namespace, name)
		}
		return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", field, c.namespace, name, err)
	}
	return s, nil
}

// schemeless is a URL without its scheme and trailing slashes, the form
// credentials are matched in.
func schemeless(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	return strings.TrimRight(u, "/")
}

// underPrefix reports whether target is prefix or below it: a credential
// for example.com never reaches example.com.other.org.
func underPrefix(target, prefix string) bool {
	return prefix != "" && strings.HasPrefix(target, prefix) && (len(target) == len(prefix) || target[len(prefix)] == '/')
}
