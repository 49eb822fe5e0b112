package helm

import (
	"strings"
	"testing"
	"time"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
)

const testIndex = `apiVersion: v1
entries:
  app:
  - {name: app, version: 1.2.0, urls: [app-1.2.0.tgz], digest: abc, description: ignored}
  - {name: app, version: 2.0.0-rc.1, urls: [app-2.0.0-rc.1.tgz]}
  - {name: app, version: 1.10.0, urls: [https://cdn.example/app-1.10.0.tgz]}
  - {name: app, version: 0.9.0, urls: [app-0.9.0.tgz]}
`

func TestPickVersion(t *testing.T) {
	idx, cost, err := parseIndex([]byte(testIndex))
	if err != nil {
		t.Fatal(err)
	}
	if cost <= 0 {
		t.Errorf("cost %d", cost)
	}
	cases := map[string]string{"": "1.10.0", "1.2.0": "1.2.0", "~1.2": "1.2.0", ">=1.0 <1.5": "1.2.0", "2.0.0-rc.1": "2.0.0-rc.1"}
	for want, got := range cases {
		cv, err := pickVersion("f", idx, &helmv1alpha1.HelmChartRepo{HelmChartRepoUrl: "https://r", HelmChartName: "app", HelmChartVersion: want})
		if err != nil || cv.Version != got {
			t.Errorf("version %q: got %v, %v; want %s", want, cv, err, got)
		}
	}
}

func TestPickVersionErrorsListVersions(t *testing.T) {
	idx, _, err := parseIndex([]byte(testIndex))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pickVersion("f", idx, &helmv1alpha1.HelmChartRepo{HelmChartRepoUrl: "https://r", HelmChartName: "app", HelmChartVersion: "3.0.0"})
	want := `f.helmChartVersion: the index of https://r has no version 3.0.0 of chart "app"; it has 2.0.0-rc.1, 1.10.0, 1.2.0, 0.9.0`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	_, err = pickVersion("f", idx, &helmv1alpha1.HelmChartRepo{HelmChartRepoUrl: "https://r", HelmChartName: "other"})
	if err == nil || !strings.Contains(err.Error(), `f.helmChartName: the index of https://r has no chart "other"`) {
		t.Errorf("got %v", err)
	}
}

func TestParseIndexRefusesNonIndex(t *testing.T) {
	for _, doc := range []string{"<html></html>", "entries: {}", "apiVersion: [1"} {
		if _, _, err := parseIndex([]byte(doc)); err == nil {
			t.Errorf("%q parsed as an index", doc)
		}
	}
}

func TestIndexCacheBoundAndTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newIndexCache(time.Minute, 100)
	c.now = func() time.Time { return now }
	idx, _, _ := parseIndex([]byte(testIndex))
	c.put("a", idx, 60)
	now = now.Add(time.Second)
	c.put("b", idx, 60) // over the bound: a, the oldest, leaves
	if _, ok := c.get("a"); ok {
		t.Error("a stayed although the cache is over its bound")
	}
	if _, ok := c.get("b"); !ok {
		t.Error("b not cached")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := c.get("b"); ok {
		t.Error("b served after its ttl")
	}
	c.put("huge", idx, 101)
	if _, ok := c.get("huge"); ok {
		t.Error("an index larger than the cache was kept")
	}
}
