package helm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/terrace-dev/terrace/deployers/lib"
)

// dockerConfig is the content of a kubernetes.io/dockerconfigjson Secret.
type dockerConfig struct {
	Auths map[string]struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Auth     string `json:"auth,omitempty"`
	} `json:"auths"`
}

// registryCredential returns the credential the first of the item's pull
// secrets holds for host, or nil when none has one. Every pull secret must
// be usable: a broken one fails the item instead of being skipped.
func (c *itemCredentials) registryCredential(ctx context.Context, host string) (*auth.Credential, error) {
	var found *auth.Credential
	for i, name := range c.pullSecrets {
		field := fmt.Sprintf("Context %s registryPullSecrets[%d]", c.context, i)
		cfg, err := c.dockerConfig(ctx, field, name)
		if err != nil {
			return nil, err
		}
		if found != nil {
			continue
		}
		for server, a := range cfg.Auths {
			if registryHost(server) != registryHost(host) {
				continue
			}
			cred := auth.Credential{Username: a.Username, Password: a.Password}
			if a.Auth != "" {
				user, pass, err := decodeBasicAuth(a.Auth)
				if err != nil {
					return nil, lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s: auths[%q].auth: %v", field, c.namespace, name, server, err)
				}
				cred = auth.Credential{Username: user, Password: pass}
			}
			found = &cred
			break
		}
	}
	return found, nil
}

func (c *itemCredentials) dockerConfig(ctx context.Context, field, name string) (*dockerConfig, error) {
	s, err := c.secret(ctx, field, name)
	if err != nil {
		return nil, err
	}
	if s.Type != corev1.SecretTypeDockerConfigJson {
		return nil, lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s has type %q; a registry pull secret has type %s", field, c.namespace, name, s.Type, corev1.SecretTypeDockerConfigJson)
	}
	raw, ok := s.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s has no key %q", field, c.namespace, name, corev1.DockerConfigJsonKey)
	}
	cfg := &dockerConfig{}
	if err := json.Unmarshal(raw, cfg); err != nil {
		return nil, lib.ConfigError(ReasonChartCredentials, "%s: Secret %s/%s key %q: not a Docker config: %v", field, c.namespace, name, corev1.DockerConfigJsonKey, err)
	}
	return cfg, nil
}

// registryHost is the host[:port] a Docker config key or a reference's
// host stands for: Docker Hub's several names are one.
func registryHost(s string) string {
	s = schemeless(s)
	s, _, _ = strings.Cut(s, "/")
	switch s {
	case "index.docker.io", "registry-1.docker.io":
		return "docker.io"
	}
	return s
}

func decodeBasicAuth(s string) (user, pass string, err error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", "", fmt.Errorf("not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("not user:password")
	}
	return user, pass, nil
}
