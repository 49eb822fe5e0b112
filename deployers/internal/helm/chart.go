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

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// Reasons of chart errors.
const (
	// ReasonChartNotSupported: the chart source is not supported yet.
	ReasonChartNotSupported = "ChartSourceNotSupported"
	// ReasonInvalidChart: the archive is not a chart, or too large.
	ReasonInvalidChart = "InvalidChart"
	// ReasonChartPullFailed: the registry did not hand out the chart.
	ReasonChartPullFailed = "ChartPullFailed"
)

// chartSource fetches charts within ChartSourceOptions.
type chartSource struct {
	opts ChartSourceOptions
}

// load returns the chart the configuration names. Every error names the
// field and the reference.
// req carries the item and its Context, whose credentials a source may use.
func (cs *chartSource) load(_ context.Context, _ *lib.Request, c helmv1alpha1.Chart) (*chart.Chart, error) {
	switch {
	case c.Ref != "":
		return cs.pull(c.Ref)
	case c.Archive != nil && c.Archive.Raw != "":
		return cs.fromRaw(c.Archive.Raw)
	case c.Archive != nil && c.Archive.Remote != nil:
		return nil, notSupported("spec.config.chart.archive.remote", "use chart.ref (an OCI registry) or chart.archive.raw")
	case c.HelmChartRepo != nil:
		return nil, notSupported("spec.config.chart.helmChartRepo", "use chart.ref (an OCI registry) or chart.archive.raw")
	case c.ResourceRef != "":
		return nil, notSupported("spec.config.chart.resourceRef", "component resources are not resolved yet; use chart.ref or chart.archive.raw")
	case c.FromResource != nil:
		return nil, notSupported("spec.config.chart.fromResource", "component resources are not resolved yet; use chart.ref or chart.archive.raw")
	}
	return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.chart: one of ref, archive, helmChartRepo, resourceRef or fromResource must be set")
}

func notSupported(field, way string) error {
	return lib.ConfigError(ReasonChartNotSupported, "%s: this chart source is not supported yet by the helm deployer; %s", field, way)
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
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, lib.ConfigError(ReasonInvalidChart, "%s: not a chart archive: %v", field, err)
	}
	return ch, nil
}

func (cs *chartSource) tooLarge(field string) error {
	return lib.ConfigError(ReasonInvalidChart, "%s: the chart archive is larger than %s (--max-chart-bytes)",
		field, resource.NewQuantity(cs.opts.MaxChartBytes, resource.BinarySI))
}

// pull pulls a chart from an OCI registry with Helm's registry client,
// through an HTTP client that keeps the bounds, with no credentials of the
// deployer's own (its Helm or Docker configuration is never consulted).
func (cs *chartSource) pull(ref string) (*chart.Chart, error) {
	const field = "spec.config.chart.ref"
	ref = strings.TrimPrefix(ref, "oci://")
	host, _, _ := strings.Cut(ref, "/")
	hc, plainHTTP, err := cs.registryHTTPClient(host)
	if err != nil {
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, err)
	}
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptAuthorizer(*anonymous(hc))}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s %q: creating the registry client: %w", field, ref, err)
	}
	res, err := rc.Pull(ref)
	if err != nil {
		return nil, cs.pullError(field, ref, err)
	}
	if int64(len(res.Chart.Data)) > cs.opts.MaxChartBytes {
		return nil, cs.tooLarge(field)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, lib.ConfigError(ReasonInvalidChart, "%s %q: not a chart archive: %v", field, ref, err)
	}
	return ch, nil
}

// pullError tells a missing or refused chart (a configuration problem)
// from a registry that did not answer (retried).
func (cs *chartSource) pullError(field, ref string, err error) error {
	var refused *refusedAddressError
	var large *chartTooLargeError
	switch {
	case errors.As(err, &refused):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, refused)
	case errors.As(err, &large):
		return cs.tooLarge(field)
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
