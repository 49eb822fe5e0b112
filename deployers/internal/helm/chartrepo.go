package helm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// ReasonChartVersionNotFound: the repository index has no such chart or version.
const ReasonChartVersionNotFound = "ChartVersionNotFound"

// fromRepo fetches a chart from a classic chart repository: its index.yaml
// (cached per repository URL and credential for --chart-repo-index-ttl)
// names the chart's versions and their URLs. An empty version is the
// latest stable one; a version that is no entry of the index is read as a
// semver range (">=1.2 <2").
func (cs *chartSource) fromRepo(ctx context.Context, creds *itemCredentials, r *helmv1alpha1.HelmChartRepo) (*chart.Chart, error) {
	return cs.fromRepoAs(ctx, creds, "spec.config.chart.helmChartRepo", r)
}

// fromRepoAs is fromRepo for a chart named by field.
func (cs *chartSource) fromRepoAs(ctx context.Context, creds *itemCredentials, field string, r *helmv1alpha1.HelmChartRepo) (*chart.Chart, error) {
	if r.HelmChartName == "" {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s.helmChartName must be set", field)
	}
	base, err := parseChartURL(field+".helmChartRepoUrl", r.HelmChartRepoUrl)
	if err != nil {
		return nil, err
	}
	base.Path = strings.TrimSuffix(base.Path, "/") + "/"
	indexURL := base.JoinPath("index.yaml")
	a, err := creds.repoAuthFor(ctx, indexURL)
	if err != nil {
		return nil, err
	}
	idx, err := cs.index(ctx, field+".helmChartRepoUrl", indexURL, a)
	if err != nil {
		return nil, err
	}
	cv, err := pickVersion(field, idx, r)
	if err != nil {
		return nil, err
	}
	if len(cv.URLs) == 0 {
		return nil, lib.ConfigError(ReasonChartVersionNotFound, "%s: the index of %s lists no URL for chart %s version %s", field, base.Redacted(), r.HelmChartName, cv.Version)
	}
	rel, err := url.Parse(cv.URLs[0])
	if err != nil {
		return nil, lib.ConfigError(ReasonChartVersionNotFound, "%s: the index of %s lists a bad URL for chart %s version %s: %v", field, base.Redacted(), r.HelmChartName, cv.Version, err)
	}
	chartURL, err := parseChartURL(field, base.ResolveReference(rel).String())
	if err != nil {
		return nil, err
	}
	digest := ""
	if cv.Digest != "" {
		digest = "sha256:" + strings.TrimPrefix(cv.Digest, "sha256:")
	}
	return cs.fetchArchive(ctx, creds, field, chartURL, digest)
}

// pickVersion finds the chart version r asks for in idx.
func pickVersion(field string, idx *repo.IndexFile, r *helmv1alpha1.HelmChartRepo) (*repo.ChartVersion, error) {
	cv, err := idx.Get(r.HelmChartName, r.HelmChartVersion)
	if err == nil {
		return cv, nil
	}
	if errors.Is(err, repo.ErrNoChartName) {
		return nil, lib.ConfigError(ReasonChartVersionNotFound, "%s.helmChartName: the index of %s has no chart %q", field, r.HelmChartRepoUrl, r.HelmChartName)
	}
	want := r.HelmChartVersion
	if want == "" {
		want = "(the latest stable)"
	}
	return nil, lib.ConfigError(ReasonChartVersionNotFound, "%s.helmChartVersion: the index of %s has no version %s of chart %q; it has %s",
		field, r.HelmChartRepoUrl, want, r.HelmChartName, versionList(idx.Entries[r.HelmChartName]))
}

// versionList names the newest versions, for an error message.
func versionList(vs repo.ChartVersions) string {
	const shown = 10
	names := make([]string, 0, min(len(vs), shown))
	for _, v := range vs[:min(len(vs), shown)] {
		names = append(names, v.Version)
	}
	out := strings.Join(names, ", ")
	if len(vs) > shown {
		out += fmt.Sprintf(" and %d older", len(vs)-shown)
	}
	if out == "" {
		out = "none"
	}
	return out
}

// index returns the repository index at u, fetched with a.
func (cs *chartSource) index(ctx context.Context, field string, u *url.URL, a *repoAuth) (*repo.IndexFile, error) {
	key := a.fingerprint + " " + u.String()
	if idx, ok := cs.indexes.get(key); ok {
		return idx, nil
	}
	data, err := cs.download(ctx, field, u, a, cs.opts.MaxRepoIndexBytes, "max-chart-repo-index-bytes")
	if err != nil {
		return nil, err
	}
	idx, cost, err := parseIndex(data)
	if err != nil {
		return nil, lib.ConfigError(ReasonChartPullFailed, "%s: %s is not a chart repository index: %v", field, u.Redacted(), err)
	}
	cs.indexes.put(key, idx, cost)
	return idx, nil
}

// parseIndex keeps of an index.yaml only what picking a version needs
// (name, version, URLs, digest), newest version first, and its size.
func parseIndex(data []byte) (*repo.IndexFile, int64, error) {
	var raw struct {
		APIVersion string `json:"apiVersion"`
		Entries    map[string][]struct {
			Version string   `json:"version"`
			URLs    []string `json:"urls"`
			Digest  string   `json:"digest"`
		} `json:"entries"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, 0, err
	}
	if raw.APIVersion == "" {
		return nil, 0, errors.New("no apiVersion")
	}
	idx := &repo.IndexFile{APIVersion: raw.APIVersion, Entries: make(map[string]repo.ChartVersions, len(raw.Entries))}
	var cost int64
	for name, versions := range raw.Entries {
		for _, v := range versions {
			idx.Entries[name] = append(idx.Entries[name], &repo.ChartVersion{
				Metadata: &chart.Metadata{Name: name, Version: v.Version}, URLs: v.URLs, Digest: v.Digest,
			})
			cost += int64(len(name)+len(v.Version)+len(v.Digest)) + 128
			for _, u := range v.URLs {
				cost += int64(len(u))
			}
		}
	}
	idx.SortEntries()
	return idx, cost, nil
}

// indexCache keeps parsed repository indexes for a short time, within a
// byte budget (the estimated size of what parseIndex keeps).
type indexCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	limit   int64
	used    int64
	entries map[string]*cachedIndex
	now     func() time.Time
}

type cachedIndex struct {
	idx     *repo.IndexFile
	cost    int64
	fetched time.Time
}

func newIndexCache(ttl time.Duration, limit int64) *indexCache {
	return &indexCache{ttl: ttl, limit: limit, entries: map[string]*cachedIndex{}, now: time.Now}
}

func (c *indexCache) get(key string) (*repo.IndexFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.now().Sub(e.fetched) > c.ttl {
		return nil, false
	}
	return e.idx, true
}

// put caches idx; the oldest indexes (expired ones first) make room.
func (c *indexCache) put(key string, idx *repo.IndexFile, cost int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.used -= old.cost
		delete(c.entries, key)
	}
	if cost > c.limit || c.ttl <= 0 {
		return
	}
	for c.used+cost > c.limit {
		keys := make([]string, 0, len(c.entries))
		for k := range c.entries {
			keys = append(keys, k)
		}
		oldest := slices.MinFunc(keys, func(a, b string) int { return c.entries[a].fetched.Compare(c.entries[b].fetched) })
		c.used -= c.entries[oldest].cost
		delete(c.entries, oldest)
	}
	c.entries[key] = &cachedIndex{idx: idx, cost: cost, fetched: c.now()}
	c.used += cost
}
