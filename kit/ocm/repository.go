package ocm

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Repository context types of an OCI registry (the spec's canonical names
// and short forms); a "/v1" suffix is accepted too.
var ociRepositoryTypes = map[string]bool{
	"OCIRegistry": true, "ociRegistry": true, "OCIRepository": true, "OCI": true, "oci": true,
}

// IsOCIRepositoryType tells whether a repository context type names an OCI
// registry.
func IsOCIRepositoryType(t string) bool {
	base, version, _ := strings.Cut(t, "/")
	return ociRepositoryTypes[base] && (version == "" || version == "v1")
}

// componentDescriptorsPrefix is the sub path of component versions under an
// OCM repository's base.
const componentDescriptorsPrefix = "component-descriptors/"

// Repository is an OCM repository in an OCI registry.
type Repository struct {
	// Base is the registry host (host[:port]) and the repository prefix,
	// without scheme: "ghcr.io/acme/ocm".
	Base string
	// PlainHTTP speaks HTTP instead of HTTPS; the caller decides when that
	// is allowed (loopback registries).
	PlainHTTP bool
	// PlainHTTPFor tells whether another registry host (one an ociArtifact
	// access names) is spoken to in plain HTTP; nil means never.
	PlainHTTPFor func(host string) bool
	// Credentials gives the credential of a registry host; nil is anonymous.
	Credentials auth.CredentialFunc
	// Client is the HTTP client; nil uses a retrying default client.
	Client *http.Client
	// Limits bound what is read; zero fields take the defaults.
	Limits Limits
}

// ParseBaseURL splits an OCM repository's baseUrl (and optional subPath)
// into the scheme-less base and whether the URL asks for plain HTTP. A
// scheme http:// asks for plain HTTP; https://, oci:// or none for HTTPS.
func ParseBaseURL(baseURL, subPath string) (base string, plainHTTP bool, err error) {
	base = strings.TrimSpace(baseURL)
	switch {
	case strings.HasPrefix(base, "http://"):
		base, plainHTTP = strings.TrimPrefix(base, "http://"), true
	case strings.HasPrefix(base, "https://"):
		base = strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "oci://"):
		base = strings.TrimPrefix(base, "oci://")
	}
	base = strings.Trim(base, "/")
	if sp := strings.Trim(subPath, "/"); sp != "" {
		base += "/" + sp
	}
	if base == "" {
		return "", false, fmt.Errorf("the OCM repository's baseUrl is empty")
	}
	if strings.Contains(base, "://") {
		return "", false, fmt.Errorf("the OCM repository's baseUrl %q has an unsupported scheme (http, https or oci)", baseURL)
	}
	return base, plainHTTP, nil
}

// Host is the registry host[:port] of the repository.
func (r *Repository) Host() string {
	host, _, _ := strings.Cut(r.Base, "/")
	return host
}

// IsLoopbackHost tells whether host (host[:port]) is a loopback address or
// localhost: the registries a caller may allow plain HTTP for.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// componentRepository is the OCI repository name of a component:
// <base>/component-descriptors/<name>.
func (r *Repository) componentRepository(name string) string {
	return r.Base + "/" + componentDescriptorsPrefix + name
}

// VersionToTag maps an OCM version to its OCI tag: build metadata after a
// "+" moves behind ".build-", as OCI tags have no "+".
func VersionToTag(version string) string {
	return strings.Replace(version, "+", ".build-", 1)
}

// TagToVersion is the reverse of VersionToTag.
func TagToVersion(tag string) string {
	if i := strings.LastIndex(tag, ".build-"); i >= 0 {
		return tag[:i] + "+" + tag[i+len(".build-"):]
	}
	return tag
}

// OCIRepository opens one OCI repository (host/path, on the repository's
// registry or another) with the repository's transport, credentials and
// limits.
func (r *Repository) OCIRepository(name string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an OCI repository name: %w", name, err)
	}
	return r.configure(repo), nil
}

// configure sets transport, credentials and limits on an OCI repository.
func (r *Repository) configure(repo *remote.Repository) *remote.Repository {
	repo.PlainHTTP = r.PlainHTTP
	hc := r.Client
	if hc == nil {
		hc = retry.DefaultClient
	}
	repo.Client = &auth.Client{Client: hc, Cache: auth.NewCache(), Credential: r.Credentials}
	repo.MaxMetadataBytes = r.Limits.withDefaults().MaxDescriptorBytes
	return repo
}

// RegistryError is a failed request to a registry: unreachable, refused
// credentials or a server error. It names the registry.
type RegistryError struct {
	Registry string
	Op       string
	Err      error
}

func (e *RegistryError) Error() string {
	if IsUnauthorized(e.Err) {
		return fmt.Sprintf("%s at registry %s: the registry refused the credentials or needs some it was not given: %v", e.Op, e.Registry, e.Err)
	}
	return fmt.Sprintf("%s at registry %s: %v", e.Op, e.Registry, e.Err)
}

func (e *RegistryError) Unwrap() error { return e.Err }

// IsUnauthorized tells whether err is a registry refusing the credentials
// or asking for some where there are none.
func IsUnauthorized(err error) bool {
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return true
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
	}
	return false
}

func (r *Repository) registryError(op string, err error) error {
	if err == nil {
		return nil
	}
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return err
	}
	return &RegistryError{Registry: r.Host(), Op: op, Err: err}
}
