package helm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/terrace-dev/terrace/deployers/lib"
)

// fromURL downloads a chart archive (chart.archive.remote.url) with the
// credentials the item's Context holds for the URL. The digest a URL
// served is reused for --chart-repo-index-ttl, per credential.
func (cs *chartSource) fromURL(ctx context.Context, creds *itemCredentials, rawURL string) (*chart.Chart, error) {
	const field = "spec.config.chart.archive.remote.url"
	u, err := parseChartURL(field, rawURL)
	if err != nil {
		return nil, err
	}
	return cs.fetchArchive(ctx, creds, field, u, "")
}

// fetchArchive returns the chart archive at u, from the cache when its
// digest (or the digest u served with the same credential) is cached;
// a downloaded archive must have digest when it is set.
func (cs *chartSource) fetchArchive(ctx context.Context, creds *itemCredentials, field string, u *url.URL, digest string) (*chart.Chart, error) {
	a, err := creds.repoAuthFor(ctx, u)
	if err != nil {
		return nil, err
	}
	if digest != "" {
		if data, ok := cs.cache.get(digest); ok {
			return loadArchive(field, u.String(), data)
		}
	}
	key := "url " + a.fingerprint + " " + u.String()
	if data, ok := cs.cache.lookup(key); ok {
		return loadArchive(field, u.String(), data)
	}
	// Items with the same credential for u share one download.
	data, err := cs.fetches.do(ctx, key, func() ([]byte, error) {
		data, err := cs.download(ctx, field, u, a, cs.opts.MaxChartBytes, "max-chart-bytes")
		if err != nil {
			return nil, err
		}
		if got := archiveDigest(data); digest != "" && got != digest {
			return nil, lib.ConfigError(ReasonInvalidChart, "%s %q: the archive's digest %s is not the one the repository index lists (%s)", field, u, got, digest)
		}
		cs.cache.remember(key, cs.cache.put(data), cs.opts.RepoIndexTTL)
		return data, nil
	})
	if err != nil {
		return nil, err
	}
	return loadArchive(field, u.String(), data)
}

// parseChartURL accepts an absolute http(s) URL.
func parseChartURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s %q: %v", field, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s %q: want an absolute http or https URL", field, raw)
	}
	return u, nil
}

// download GETs u within the bounds: the response is capped at limit
// (set by --<flag>). A missing file, refused access, a refused address or
// an oversized response is a configuration problem; a server that does not
// answer, or answers with a server error, is retried.
func (cs *chartSource) download(ctx context.Context, field string, u *url.URL, a *repoAuth, limit int64, flag string) ([]byte, error) {
	ref := u.Redacted()
	hc, _, err := cs.guardedClient(serverClient{kind: "chart server", host: u.Host, rootCAs: a.rootCAs, limit: limit, limitFlag: flag})
	if err != nil {
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s %q: %v", field, ref, err)
	}
	if a.header != "" {
		req.Header.Set("Authorization", a.header)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, downloadError(field, ref, err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: the server has no such file (HTTP %d)", field, ref, resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: the server refused access (HTTP %d); credentials for it come from the item's Context, configurations.helmChartRepoCredentials", field, ref, resp.StatusCode)
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s %q: the server answered HTTP %d", field, ref, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, lib.TransientError(ReasonChartPullFailed, fmt.Errorf("%s %q: the server answered HTTP %d", field, ref, resp.StatusCode))
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, downloadError(field, ref, err)
	}
	return data, nil
}

func downloadError(field, ref string, err error) error {
	var refused *refusedAddressError
	var large *tooLargeError
	var untrusted *tls.CertificateVerificationError
	switch {
	case errors.As(err, &refused):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: %v", field, ref, refused)
	case errors.As(err, &large):
		return lib.ConfigError(ReasonInvalidChart, "%s %q: %v", field, ref, large)
	case errors.As(err, &untrusted):
		return lib.ConfigError(ReasonChartPullFailed, "%s %q: the server's certificate is not trusted: %v; the CA of a server with a certificate of its own CA goes into customCAData of the Context's helmChartRepoCredentials", field, ref, untrusted.Err)
	}
	return lib.TransientError(ReasonChartPullFailed, fmt.Errorf("%s %q: downloading: %w", field, ref, err))
}
