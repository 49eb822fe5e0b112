package helm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"helm.sh/helm/v3/pkg/chart"
	"oras.land/oras-go/v2/registry/remote/auth"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// ReasonComponentResource: the component version or its chart resource
// cannot be used (malformed reference, unknown version or resource, not a
// chart).
const ReasonComponentResource = "ComponentResourceInvalid"

// Access type of a chart in a classic chart repository, with its fields.
const accessTypeHelmChartRepository = "helmChartRepository"

// chartMediaTypes are the media types of a chart archive as a local blob.
var chartMediaTypes = map[string]bool{
	"application/vnd.cncf.helm.chart.content.v1.tar+gzip": true,
	"application/tar+gzip":                                true,
	"application/x-tar+gzip":                              true,
	"application/x-tgz":                                   true,
	"application/gzip":                                    true,
	"application/x-gzip":                                  true,
}

// componentRef says where a chart resource is: a component version in a
// repository (cd nil, read there) or an inline descriptor (cd set).
type componentRef struct {
	field    string
	rc       *lsv1alpha1.RepositoryContext
	name     string
	version  string
	cd       *ocm.ComponentDescriptor
	resource ocm.ResourceIdentity
}

// fromResourceKey reads the chart a resource key (getResourceKey) names.
func (cs *chartSource) fromResourceKey(ctx context.Context, creds *itemCredentials, key string) (*chart.Chart, error) {
	const field = "spec.config.chart.resourceRef"
	k, err := ocm.DecodeResourceKey(strings.TrimSpace(key))
	if err != nil {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: %v", field, err)
	}
	return cs.fromComponent(ctx, creds, componentRef{
		field: field, rc: k.RepositoryContext, name: k.ComponentName, version: k.Version, resource: k.Resource,
	})
}

// fromResource reads the chart resource of a component version named by
// reference or given inline.
func (cs *chartSource) fromResource(ctx context.Context, creds *itemCredentials, r *helmv1alpha1.RemoteChartReference) (*chart.Chart, error) {
	const field = "spec.config.chart.fromResource"
	if r.ResourceName == "" {
		return nil, lib.ConfigError(ReasonComponentResource, "%s.resourceName must be set", field)
	}
	ref := componentRef{field: field, resource: ocm.ResourceIdentity{Name: r.ResourceName}}
	switch {
	case r.Reference != nil && len(r.Reference.RawMessage) > 0:
		var err error
		if creds, err = cs.componentReference(ctx, creds, field+".ref", r.Reference.RawMessage, &ref); err != nil {
			return nil, err
		}
	case r.Inline != nil && len(r.Inline.RawMessage) > 0:
		cd, err := ocm.Decode(r.Inline.RawMessage)
		if err != nil {
			return nil, lib.ConfigError(ReasonComponentResource, "%s.inline: %v", field, err)
		}
		ref.cd, ref.name, ref.version = cd, cd.Component.Name, cd.Component.Version
		if n := len(cd.Component.RepositoryContexts); n > 0 {
			last := cd.Component.RepositoryContexts[n-1]
			ref.rc = &lsv1alpha1.RepositoryContext{Type: last.Type, BaseURL: last.BaseURL, SubPath: last.SubPath}
		}
	default:
		return nil, lib.ConfigError(ReasonComponentResource, "%s: one of ref or inline must be set", field)
	}
	return cs.fromComponent(ctx, creds, ref)
}

// componentReference reads the component reference at field into ref. A
// reference without repositoryContext is read from the one of the item's
// Context, as Landscaper does; the credentials to read it with are returned.
func (cs *chartSource) componentReference(ctx context.Context, creds *itemCredentials, field string, raw []byte, ref *componentRef) (*itemCredentials, error) {
	var cdRef lsv1alpha1.ComponentDescriptorReference
	if err := json.Unmarshal(raw, &cdRef); err != nil {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: not a component reference: %v", field, err)
	}
	if cdRef.ComponentName == "" || cdRef.Version == "" {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: componentName and version must be set", field)
	}
	ref.rc, ref.name, ref.version = cdRef.RepositoryContext, cdRef.ComponentName, cdRef.Version
	if ref.rc != nil {
		return creds, nil
	}
	if creds.context == "" {
		// A default Context created moments ago may not be cached yet.
		var err error
		if creds, err = cs.liveDefaultCredentials(ctx, creds.namespace); err != nil {
			return nil, err
		}
	}
	switch {
	case creds.repositoryContext != nil:
		ref.rc = creds.repositoryContext
		return creds, nil
	case creds.context == "":
		return nil, lib.ConfigError(ReasonComponentResource, "%s.repositoryContext is not set and the item has no Context to take it from (spec.context is empty or %q, and %s has no Context %q); set one of them",
			field, lsv1alpha1.DefaultContextName, creds.namespace, lsv1alpha1.DefaultContextName)
	}
	return nil, lib.ConfigError(ReasonComponentResource, "%s.repositoryContext is not set and the item's Context %s has no repositoryContext; set one of them", field, creds.context)
}

// fromComponent resolves the component version (unless given inline),
// finds the resource and reads the chart through its access.
func (cs *chartSource) fromComponent(ctx context.Context, creds *itemCredentials, ref componentRef) (*chart.Chart, error) {
	where := fmt.Sprintf("%s (component version %s:%s)", ref.field, ref.name, ref.version)
	var repo *ocm.Repository
	if ref.rc != nil {
		var err error
		if repo, err = cs.componentRepository(ctx, creds, where, ref.rc); err != nil {
			return nil, err
		}
	}
	cd := ref.cd
	// layers are the manifest's, so that a local blob is read without
	// fetching the manifest again (nil for an inline descriptor).
	var layers []ocispec.Descriptor
	if cd == nil {
		v, err := ocm.ResolveVersion(ctx, repo, ref.name, ref.version)
		if err != nil {
			return nil, cs.componentError(where, err)
		}
		cd, layers = v.Descriptor, v.Layers
	}
	res, err := cd.Resource(ref.resource.Name, ref.resource.ExtraIdentity)
	if err != nil {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
	}
	where = fmt.Sprintf("%s resource %q", where, res.Name)
	switch {
	case res.Access.IsOCIArtifact():
		imageRef, err := res.Access.OCIArtifactReference()
		if err != nil {
			return nil, lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
		}
		return cs.pullAs(ctx, creds, where, imageRef)
	case strings.HasPrefix(res.Access.Type, accessTypeHelmChartRepository):
		return cs.fromRepoAs(ctx, creds, where, &helmv1alpha1.HelmChartRepo{
			HelmChartRepoUrl: accessString(res.Access, "helmChartRepoUrl"),
			HelmChartName:    accessString(res.Access, "helmChartName"),
			HelmChartVersion: accessString(res.Access, "helmChartVersion"),
		})
	case res.Access.IsLocalBlob():
		if repo == nil {
			return nil, lib.ConfigError(ReasonComponentResource, "%s: a local blob is read from the component's repository, and the inline descriptor names no repositoryContexts", where)
		}
		return cs.localBlobChart(ctx, where, repo, cd, layers, res)
	}
	return nil, lib.ConfigError(ReasonComponentResource, "%s: access type %q is no chart source: the helm deployer reads localBlob, ociArtifact and helmChartRepository", where, res.Access.Type)
}

func accessString(a ocm.Access, key string) string {
	s, _ := a.Fields[key].(string)
	return s
}

// componentRepository opens the OCM repository rc names with the bounds
// of a registry (--max-chart-bytes, --registry-request-timeout, the
// loopback guard) and the item's registry pull secrets.
func (cs *chartSource) componentRepository(ctx context.Context, creds *itemCredentials, where string, rc *lsv1alpha1.RepositoryContext) (*ocm.Repository, error) {
	if !ocm.IsOCIRepositoryType(rc.Type) {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: repository context of type %q: the helm deployer reads OCI registries (OCIRegistry)", where, rc.Type)
	}
	base, plainHTTP, err := ocm.ParseBaseURL(rc.BaseURL, rc.SubPath)
	if err != nil {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
	}
	host, _, _ := strings.Cut(base, "/")
	hc, loopback, err := cs.registryHTTPClient(host)
	if err != nil {
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s: %v", where, err)
	}
	return &ocm.Repository{
		Base: base, PlainHTTP: plainHTTP || loopback, Client: hc,
		Credentials: func(ctx context.Context, host string) (auth.Credential, error) {
			cred, err := creds.registryCredential(ctx, host)
			if err != nil || cred == nil {
				return auth.EmptyCredential, err
			}
			return *cred, nil
		},
		Limits: ocm.Limits{MaxBlobBytes: cs.opts.MaxChartBytes},
	}, nil
}

// componentError tells a missing, refused or malformed component version
// (a configuration problem) from a registry that did not answer (retried).
func (cs *chartSource) componentError(where string, err error) error {
	var notFound *ocm.NotFoundError
	var regErr *ocm.RegistryError
	var refused *refusedAddressError
	var large *tooLargeError
	var ocmLarge *ocm.TooLargeError
	var cfgErr *lib.Error
	switch {
	case errors.As(err, &cfgErr):
		return cfgErr
	case errors.As(err, &refused):
		return lib.ConfigError(ReasonChartPullFailed, "%s: %v", where, refused)
	case errors.As(err, &large):
		return cs.tooLarge(where)
	case errors.As(err, &ocmLarge):
		if ocmLarge.Flag == "ocm-max-blob-bytes" {
			return cs.tooLarge(where)
		}
		return lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
	case errors.As(err, &notFound):
		return lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
	case errors.As(err, &regErr) && ocm.IsUnauthorized(err):
		return lib.ConfigError(ReasonChartPullFailed, "%s: %v; its credentials come from the registryPullSecrets of the item's Context", where, err)
	case errors.As(err, &regErr):
		return lib.TransientError(ReasonChartPullFailed, fmt.Errorf("%s: %w", where, err))
	}
	return lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
}

// localBlobChart reads a chart stored as a local blob of cd. The blob's
// digest names its content: a cached archive of that digest is used, and
// items reading the same blob share one download.
func (cs *chartSource) localBlobChart(ctx context.Context, where string, repo *ocm.Repository, cd *ocm.ComponentDescriptor, layers []ocispec.Descriptor, res *ocm.Resource) (*chart.Chart, error) {
	lb, err := res.Access.LocalBlob()
	if err != nil {
		return nil, lib.ConfigError(ReasonComponentResource, "%s: %v", where, err)
	}
	if lb.MediaType != "" && !isChartMediaType(lb.MediaType) {
		return nil, notAChart(where, lb.MediaType)
	}
	if data, ok := cs.cache.get(lb.LocalReference); ok {
		return loadArchive(where, "", data)
	}
	data, err := cs.fetches.do(ctx, "ocm-blob "+lb.LocalReference, func() ([]byte, error) {
		rc, info, err := ocm.BlobOf(ctx, repo, cd, layers, res)
		if err != nil {
			return nil, cs.componentError(where, err)
		}
		defer func() { _ = rc.Close() }()
		if !isChartMediaType(info.MediaType) {
			return nil, notAChart(where, info.MediaType)
		}
		data, err := io.ReadAll(rc)
		if err != nil {
			return nil, cs.componentError(where, err)
		}
		cs.cache.put(data)
		return data, nil
	})
	if err != nil {
		return nil, err
	}
	return loadArchive(where, "", data)
}

func isChartMediaType(mediaType string) bool {
	base, _, _ := strings.Cut(mediaType, ";")
	return chartMediaTypes[strings.TrimSpace(base)]
}

func notAChart(where, mediaType string) error {
	return lib.ConfigError(ReasonInvalidChart, "%s: media type %q is not a chart archive (application/vnd.cncf.helm.chart.content.v1.tar+gzip or application/tar+gzip)", where, mediaType)
}
