package ocm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"oras.land/oras-go/v2/registry/remote/auth"
)

// DockerConfig holds registry credentials in the format of a docker config
// file (~/.docker/config.json) and of a Kubernetes .dockerconfigjson
// Secret: "auths" keyed by registry host.
type DockerConfig struct {
	auths map[string]auth.Credential
}

type dockerConfigFile struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredsStore  string                `json:"credsStore"`
	CredHelpers map[string]string     `json:"credHelpers"`
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// ParseDockerConfig reads a docker config JSON. Credential helpers
// (credsStore, credHelpers) are not run: only credentials in the file
// count.
func ParseDockerConfig(data []byte) (*DockerConfig, error) {
	var f dockerConfigFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a docker config JSON: %w", err)
	}
	cfg := &DockerConfig{auths: map[string]auth.Credential{}}
	for key, a := range f.Auths {
		cred, err := a.credential()
		if err != nil {
			return nil, fmt.Errorf("docker config entry %q: %w", key, err)
		}
		cfg.auths[normalizeRegistryKey(key)] = cred
	}
	return cfg, nil
}

// LoadDockerConfig reads a docker config file.
func LoadDockerConfig(path string) (*DockerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials: %w", err)
	}
	cfg, err := ParseDockerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return cfg, nil
}

func (a dockerAuth) credential() (auth.Credential, error) {
	cred := auth.Credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken, AccessToken: a.RegistryToken}
	if a.Auth != "" {
		decoded, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return cred, fmt.Errorf("auth is not base64: %w", err)
		}
		user, pass, ok := strings.Cut(string(decoded), ":")
		if !ok {
			return cred, fmt.Errorf("auth is not base64 of user:password")
		}
		cred.Username, cred.Password = user, pass
	}
	return cred, nil
}

// normalizeRegistryKey turns the keys docker writes ("https://index.docker.io/v1/",
// "registry.example.com") into a host[:port].
func normalizeRegistryKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	if key == "index.docker.io" {
		return "docker.io"
	}
	return key
}

// Has tells whether the config holds credentials for host.
func (c *DockerConfig) Has(host string) bool {
	_, ok := c.lookup(host)
	return ok
}

func (c *DockerConfig) lookup(host string) (auth.Credential, bool) {
	if c == nil {
		return auth.EmptyCredential, false
	}
	if cred, ok := c.auths[host]; ok {
		return cred, true
	}
	if host == "registry-1.docker.io" {
		cred, ok := c.auths["docker.io"]
		return cred, ok
	}
	return auth.EmptyCredential, false
}

// CredentialFunc is the config as oras-go asks for credentials: the
// registry's entry, or none.
func (c *DockerConfig) CredentialFunc() auth.CredentialFunc {
	return func(_ context.Context, hostport string) (auth.Credential, error) {
		cred, _ := c.lookup(hostport)
		return cred, nil
	}
}

// Merge returns a config with the entries of c and then of other (other
// wins on the same host).
func (c *DockerConfig) Merge(other *DockerConfig) *DockerConfig {
	out := &DockerConfig{auths: map[string]auth.Credential{}}
	for _, src := range []*DockerConfig{c, other} {
		if src == nil {
			continue
		}
		for k, v := range src.auths {
			out.auths[k] = v
		}
	}
	return out
}
