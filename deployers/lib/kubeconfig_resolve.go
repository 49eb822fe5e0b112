package lib

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// DefaultKubeconfigKey is the Secret key a kubeconfig is read from when a
// secretRef names none.
const DefaultKubeconfigKey = "kubeconfig"

// ReasonTargetUnreachable: the Target's server name did not resolve, or its
// cluster did not answer.
const ReasonTargetUnreachable = "TargetUnreachable"

// TargetResolverOptions are what a TargetResolver needs.
type TargetResolverOptions struct {
	// Secrets reads the Secrets Targets name. An uncached reader: caching
	// every Secret of the cluster would cost memory and list/watch rights.
	Secrets client.Reader
	// Guard bounds every connection to a Target's cluster.
	Guard TargetClientOptions
	// Self is the deployer's own connection to the cluster that holds the
	// Targets; its server and CA make the kubeconfig of self targets. Nil:
	// self targets are refused.
	Self *rest.Config
	// Tokens mints ServiceAccount tokens (TokenRequest) for self targets.
	Tokens client.Client
}

// TargetResolver turns kubernetes-cluster Targets into client
// configurations, whichever of Landscaper's forms a Target uses:
// spec.config.kubeconfig as a string (or the kubeconfig object itself),
// spec.config.kubeconfig.secretRef, spec.secretRef carrying the whole
// configuration, and spec.config.selfConfig.
type TargetResolver struct {
	secrets client.Reader
	guard   TargetClientOptions
	self    *selfTargets
}

// NewTargetResolver returns a resolver; see TargetResolverOptions.
func NewTargetResolver(o TargetResolverOptions) *TargetResolver {
	r := &TargetResolver{secrets: o.Secrets, guard: o.Guard}
	if o.Self != nil && o.Tokens != nil {
		r.self = newSelfTargets(o.Self, o.Tokens)
	}
	return r
}

// TargetKubeconfig is the kubeconfig a Target resolved to.
type TargetKubeconfig struct {
	// Data is the kubeconfig. It identifies the connection: clients may be
	// cached by it (a renewed self-target token makes a new one).
	Data []byte
	// self: made by the deployer for its own cluster, not written by a tenant.
	self bool
}

// clusterTargetConfig is a kubernetes-cluster Target's configuration.
type clusterTargetConfig struct {
	Kubeconfig json.RawMessage   `json:"kubeconfig,omitempty"`
	SelfConfig *selfTargetConfig `json:"selfConfig,omitempty"`
	OIDCConfig json.RawMessage   `json:"oidcConfig,omitempty"`
}

// kubeconfigSecretRef is spec.config.kubeconfig.secretRef.
type kubeconfigSecretRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Key       string `json:"key,omitempty"`
}

// Kubeconfig resolves the kubeconfig of a kubernetes-cluster Target. Bad
// input is a ConfigError naming the Target, the field and why; a Secret or
// ServiceAccount that could not be read is a TransientError.
func (r *TargetResolver) Kubeconfig(ctx context.Context, t *lsv1alpha1.Target) (*TargetKubeconfig, error) {
	if t == nil {
		return nil, ConfigError(ReasonInvalidConfig, "spec.target: the deploy item needs a Target of type %s", lsv1alpha1.KubernetesClusterTargetType)
	}
	raw, field, err := r.configOf(ctx, t)
	if err != nil {
		return nil, err
	}
	var cfg clusterTargetConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s: not a kubernetes-cluster configuration: %v", t.Namespace, t.Name, field, err)
	}
	switch {
	case cfg.SelfConfig != nil && len(cfg.Kubeconfig) > 0:
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s: kubeconfig and selfConfig are both set; set one", t.Namespace, t.Name, field)
	case cfg.SelfConfig != nil:
		if r.guard.DenySelfTargets {
			return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.selfConfig: this deployer refuses self targets (--deny-self-targets)", t.Namespace, t.Name, field)
		}
		if r.self == nil {
			return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.selfConfig: this deployer does not serve self targets", t.Namespace, t.Name, field)
		}
		kc, err := r.self.kubeconfig(ctx, t, *cfg.SelfConfig, field+".selfConfig")
		if err != nil {
			return nil, err
		}
		return &TargetKubeconfig{Data: kc, self: true}, nil
	case len(cfg.Kubeconfig) > 0:
		kc, err := r.kubeconfigValue(ctx, t, cfg.Kubeconfig, field+".kubeconfig")
		if err != nil {
			return nil, err
		}
		return &TargetKubeconfig{Data: kc}, nil
	case len(cfg.OIDCConfig) > 0:
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.oidcConfig: OIDC targets are not supported; use kubeconfig or selfConfig", t.Namespace, t.Name, field)
	}
	return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s: kubeconfig or selfConfig must be set", t.Namespace, t.Name, field)
}

// configOf returns the Target's configuration as JSON and the field it came
// from, for messages: spec.config inline, or the Secret spec.secretRef names.
func (r *TargetResolver) configOf(ctx context.Context, t *lsv1alpha1.Target) (json.RawMessage, string, error) {
	ref := t.Spec.SecretRef
	if ref == nil {
		if t.Spec.Config == nil || len(bytes.TrimSpace(t.Spec.Config.RawMessage)) == 0 {
			return nil, "", ConfigError(ReasonInvalidConfig, "Target %s/%s: spec.config (kubeconfig or selfConfig) or spec.secretRef must be set", t.Namespace, t.Name)
		}
		return t.Spec.Config.RawMessage, "spec.config", nil
	}
	s, err := r.secret(ctx, t, "spec.secretRef", t.Namespace, ref.Name)
	if err != nil {
		return nil, "", err
	}
	if ref.Key == "" {
		// Without a key the Secret's data is the configuration, one field a key.
		if _, ok := s.Data[DefaultKubeconfigKey]; !ok {
			return nil, "", ConfigError(ReasonInvalidConfig, "Target %s/%s: spec.secretRef: Secret %s has no key %q", t.Namespace, t.Name, ref.Name, DefaultKubeconfigKey)
		}
		fields := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			fields[k] = string(v)
		}
		raw, err := json.Marshal(fields)
		return raw, "spec.secretRef", err
	}
	value, ok := s.Data[ref.Key]
	if !ok || len(value) == 0 {
		return nil, "", ConfigError(ReasonInvalidConfig, "Target %s/%s: spec.secretRef: Secret %s has no key %q", t.Namespace, t.Name, ref.Name, ref.Key)
	}
	field := fmt.Sprintf("spec.secretRef (Secret %s, key %s)", ref.Name, ref.Key)
	return configFromSecretValue(value), field, nil
}

// configFromSecretValue reads the value of spec.secretRef's key: a whole
// configuration (JSON or YAML with kubeconfig or selfConfig) or, as before
// configurations were kept in Secrets, the kubeconfig alone.
func configFromSecretValue(value []byte) json.RawMessage {
	var probe map[string]json.RawMessage
	if j, err := yaml.YAMLToJSON(value); err == nil && json.Unmarshal(j, &probe) == nil {
		for _, k := range []string{"kubeconfig", "selfConfig", "oidcConfig"} {
			if _, ok := probe[k]; ok {
				return j
			}
		}
	}
	raw, _ := json.Marshal(map[string]string{"kubeconfig": string(value)}) // a string always marshals
	return raw
}

// kubeconfigValue reads a kubeconfig field: a string of YAML, a secretRef
// to a Secret in the Target's namespace, or (accepted too) the kubeconfig
// object itself.
func (r *TargetResolver) kubeconfigValue(ctx context.Context, t *lsv1alpha1.Target, v json.RawMessage, field string) ([]byte, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s is empty", t.Namespace, t.Name, field)
		}
		return []byte(s), nil
	}
	var holder struct {
		SecretRef *kubeconfigSecretRef `json:"secretRef"`
	}
	if err := json.Unmarshal(v, &holder); err != nil || holder.SecretRef == nil {
		return v, nil
	}
	ref, field := holder.SecretRef, field+".secretRef"
	if ref.Name == "" {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.name must be set", t.Namespace, t.Name, field)
	}
	if ref.Namespace != "" && ref.Namespace != t.Namespace {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s.namespace: Secret %s/%s is in another namespace than the Target; only Secrets in the Target's own namespace may be used",
			t.Namespace, t.Name, field, ref.Namespace, ref.Name)
	}
	sec, err := r.secret(ctx, t, field, t.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	key := ref.Key
	if key == "" {
		key = DefaultKubeconfigKey
	}
	kc := sec.Data[key]
	if len(kc) == 0 {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: %s: Secret %s has no key %q", t.Namespace, t.Name, field, ref.Name, key)
	}
	return kc, nil
}

// secret reads a Secret a Target names, uncached, on use.
func (r *TargetResolver) secret(ctx context.Context, t *lsv1alpha1.Target, field, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			// Its own reason: the Target is there, its credentials are not. The
			// deployer does not watch Secrets, so creating the Secret later does
			// not wake the item: the message says how to retry.
			return nil, ConfigError(ReasonTargetSecretNotFound, "Target %s/%s: %s: Secret %s not found; create it, then retry with the annotation %s: %s (or let the next job of the item's execution pick it up)",
				t.Namespace, t.Name, field, name, lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
		}
		return nil, targetTransient("TargetSecretUnreadable", err, "Target %s/%s: %s: reading Secret %s: %v", t.Namespace, t.Name, field, name, err)
	}
	return s, nil
}

// RESTConfig builds the client configuration of a resolved kubeconfig, with
// inline credentials only (RESTConfigFromKubeconfig) and every connection
// bounded by the guard. A tenant's kubeconfig must also name an address the
// guard allows; a self target's server is the deployer's own configuration.
func (r *TargetResolver) RESTConfig(ctx context.Context, t *lsv1alpha1.Target, kc *TargetKubeconfig) (*rest.Config, error) {
	cfg, err := RESTConfigFromKubeconfig(kc.Data)
	if err != nil {
		return nil, ConfigError(ReasonInvalidConfig, "Target %s/%s: the kubeconfig is invalid: %v", t.Namespace, t.Name, err)
	}
	if kc.self {
		r.guard.Bound(cfg)
		return cfg, nil
	}
	if err := r.guard.Guard(ctx, cfg); err != nil {
		var refused *AddressRefusedError
		if errors.As(err, &refused) {
			return nil, ConfigError(ReasonTargetAddressRefused, "Target %s/%s: %s", t.Namespace, t.Name, refused.Message)
		}
		return nil, TransientError(ReasonTargetUnreachable, fmt.Errorf("target %s/%s: %w", t.Namespace, t.Name, err))
	}
	return cfg, nil
}

// targetTransient is a retried error keeping err's chain, with a message
// that starts with the Target it concerns.
func targetTransient(reason string, err error, format string, args ...any) *Error {
	e := TransientError(reason, err)
	e.Message = fmt.Sprintf(format, args...)
	return e
}
