package helm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// Reasons of chart errors.
const (
	// ReasonInvalidChart: the archive is not a chart, or too large.
	ReasonInvalidChart = "InvalidChart"
	// ReasonChartPullFailed: the registry or chart server did not hand out the chart.
	ReasonChartPullFailed = "ChartPullFailed"
)

// chartSource fetches charts within ChartSourceOptions, with the
// credentials of the item's Context, through a cache shared by all items.
type chartSource struct {
	opts    ChartSourceOptions
	cache   *chartCache
	indexes *indexCache
	// fetches joins concurrent downloads of one archive.
	fetches flightGroup
	// contexts reads Contexts (the manager's cache); secrets reads Secrets
	// (and Contexts the cache does not hold yet) from the API server.
	contexts client.Reader
	secrets  client.Reader
}

func newChartSource(opts ChartSourceOptions, contexts, secrets client.Reader) (*chartSource, error) {
	opts.setDefaults()
	cs := &chartSource{
		opts: opts, contexts: contexts, secrets: secrets,
		cache:   newChartCache(opts.CacheBytes),
		indexes: newIndexCache(opts.RepoIndexTTL, opts.RepoIndexCacheBytes),
	}
	if opts.CacheDir != "" {
		disk, err := openDiskCache(opts.CacheDir, opts.CacheDirBytes)
		if err != nil {
			return nil, err
		}
		cs.cache.disk = disk
	}
	return cs, nil
}

// load returns the chart the configuration names. Every error names the
// field and the reference.
func (cs *chartSource) load(ctx context.Context, req *lib.Request, c helmv1alpha1.Chart) (*chart.Chart, error) {
	switch {
	case c.Archive != nil && c.Archive.Raw != "":
		return cs.fromRaw(c.Archive.Raw)
	case c.Ref == "" && (c.Archive == nil || c.Archive.Remote == nil) && c.HelmChartRepo == nil && c.ResourceRef == "" && c.FromResource == nil:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.chart: one of ref, archive, helmChartRepo, resourceRef or fromResource must be set")
	}
	creds, err := cs.credentialsOf(ctx, req.Item)
	if err != nil {
		return nil, err
	}
	switch {
	case c.ResourceRef != "":
		return cs.fromResourceKey(ctx, creds, c.ResourceRef)
	case c.FromResource != nil:
		return cs.fromResource(ctx, creds, c.FromResource)
	case c.Ref != "":
		return cs.pull(ctx, creds, c.Ref)
	case c.Archive != nil && c.Archive.Remote != nil:
		return cs.fromURL(ctx, creds, c.Archive.Remote.URL)
	default:
		return cs.fromRepo(ctx, creds, c.HelmChartRepo)
	}
}

// fromRaw loads a base64-encoded chart archive.
func (cs *chartSource) fromRaw(raw string) (*chart.Chart, error) {
	const field = "spec.config.chart.archive.raw"
	if int64(base64.StdEncoding.DecodedLen(len(raw))) > cs.opts.MaxChartBytes+2 {
		return nil, cs.tooLarge(field)
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(raw))
	if err != nil {
		return nil, lib.ConfigError(ReasonInvalidChart, "%s: not base64: %v", field, err)
	}
	if int64(len(data)) > cs.opts.MaxChartBytes {
		return nil, cs.tooLarge(field)
	}
	return loadArchive(field, "", data)
}

// loadArchive loads a chart archive; ref (may be empty) names where it came from.
func loadArchive(field, ref string, data []byte) (*chart.Chart, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		if ref != "" {
			field = fmt.Sprintf("%s %q", field, ref)
		}
		return nil, lib.ConfigError(ReasonInvalidChart, "%s: not a chart archive: %v", field, err)
	}
	return ch, nil
}

func (cs *chartSource) tooLarge(field string) error {
	return lib.ConfigError(ReasonInvalidChart, "%s: the chart archive is larger than %s (--max-chart-bytes)",
		field, resource.NewQuantity(cs.opts.MaxChartBytes, resource.BinarySI))
}

// pull pulls a chart from an OCI registry with Helm's registry client,
// through an HTTP client that keeps the bounds, with the credential of the
// item's pull secrets for the registry or none (the deployer's own Helm or
// Docker configuration is never consulted). The manifest is resolved on
// every pull, with the item's credential; the chart layer comes from the
// cache when the manifest was pulled before.
func (cs *chartSource) pull(ctx context.Context, creds *itemCredentials, ref string) (*chart.Chart, error) {
	return cs.pullAs(ctx, creds, "spec.config.chart.ref", ref)
}

// pullAs is pull for a reference read from field.
func (cs *chartSource) pullAs(ctx context.Context, creds *itemCredentials, field, ref string) (*chart.Chart, error) {
	ref = strings.TrimPrefix(ref, "oci://")
	host, _, _ := strings.Cut(ref, "/")
	hc, plainHTTP, err := cs.registryHTTPClient(host)
	if err != nil {
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, err)
	}
	cred, err := creds.registryCredential(ctx, host)
	if err != nil {
		return nil, err
	}
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptAuthorizer(*registryAuthorizer(hc, host, cred))}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s %q: creating the registry client: %w", field, ref, err)
	}
	desc, err := rc.Resolve(ref)
	if err != nil {
		return nil, cs.pullError(field, ref, err)
	}
	if data, ok := cs.cache.lookup(manifestKey(desc.Digest.String())); ok {
		return loadArchive(field, ref, data)
	}
	// The manifest names the content, which the item may read: items
	// resolving to the same manifest share one pull.
	data, err := cs.fetches.do(ctx, manifestKey(desc.Digest.String()), func() ([]byte, error) {
		res, err := rc.Pull(ref)
		if err != nil {
			return nil, cs.pullError(field, ref, err)
		}
		if int64(len(res.Chart.Data)) > cs.opts.MaxChartBytes {
			return nil, cs.tooLarge(field)
		}
		cs.cache.remember(manifestKey(res.Manifest.Digest), cs.cache.put(res.Chart.Data), 0)
		return res.Chart.Data, nil
	})
	if err != nil {
		return nil, err
	}
	return loadArchive(field, ref, data)
}

// manifestKey is the cache name of an OCI manifest: it names its content,
// so it never expires.
func manifestKey(digest string) string { return "oci-manifest " + digest }

// pullError tells a missing or refused chart (a configuration problem)
// from a registry that did not answer (retried).
func (cs *chartSource) pullError(field, ref string, err error) error {
	var refused *refusedAddressError
	var large *tooLargeError
	switch {
	case errors.As(err, &refused):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, refused)
	case errors.As(err, &large):
		return cs.tooLarge(field)
	case isUnauthorized(err):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: the registry refused access: %v; its credentials come from the registryPullSecrets of the item's Context", field, ref, err)
	case isNotFound(err):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: the registry has no such chart: %v", field, ref, err)
	}
	return lib.TransientError(ReasonChartPullFailed, fmt.Errorf("%s %q: pulling the chart: %w", field, ref, err))
}

func isNotFound(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "not found") || strings.Contains(msg, "NAME_UNKNOWN") || strings.Contains(msg, "MANIFEST_UNKNOWN") ||
		strings.Contains(msg, "invalid reference")
}

func isUnauthorized(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "status code 401") || strings.Contains(msg, "status code 403") || strings.Contains(msg, "UNAUTHORIZED") || strings.Contains(msg, "DENIED") ||
		strings.Contains(msg, "credential not found")
}
