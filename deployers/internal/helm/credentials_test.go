package helm

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
)

func TestRepoAuthLongestPrefixOnPathBoundary(t *testing.T) {
	c := &itemCredentials{context: "ns/ctx", repoAuths: []helmv1alpha1.Auth{
		{URL: "https://charts.example", AuthHeader: "host"},
		{URL: "charts.example/team/", AuthHeader: "team"},
	}}
	cases := map[string]string{
		"https://charts.example/index.yaml":          "host",
		"http://charts.example/team/index.yaml":      "team",
		"https://charts.example/teams/index.yaml":    "host",
		"https://charts.example.evil.org/index.yaml": "",
		"https://other.example/index.yaml":           "",
	}
	for raw, want := range cases {
		u, _ := url.Parse(raw)
		a, err := c.repoAuthFor(context.Background(), u)
		if err != nil || a.header != want {
			t.Errorf("%s: header %q, %v; want %q", raw, a.header, err, want)
		}
	}
}

func TestRepoAuthFingerprintsDiffer(t *testing.T) {
	c := &itemCredentials{repoAuths: []helmv1alpha1.Auth{{URL: "a.example", AuthHeader: "one"}, {URL: "b.example", AuthHeader: "two"}}}
	ua, _ := url.Parse("https://a.example/x")
	ub, _ := url.Parse("https://b.example/x")
	un, _ := url.Parse("https://c.example/x")
	a, _ := c.repoAuthFor(context.Background(), ua)
	b, _ := c.repoAuthFor(context.Background(), ub)
	n, _ := c.repoAuthFor(context.Background(), un)
	if a.fingerprint == b.fingerprint || a.fingerprint == "" || n.fingerprint != "" {
		t.Errorf("fingerprints %q %q %q", a.fingerprint, b.fingerprint, n.fingerprint)
	}
}

func TestRepoAuthBadCustomCA(t *testing.T) {
	cases := map[string]string{
		"%%%": "customCAData: not base64",
		base64.StdEncoding.EncodeToString([]byte("no pem")): "customCAData: no PEM certificate in it",
	}
	for data, want := range cases {
		c := &itemCredentials{context: "ns/ctx", repoAuths: []helmv1alpha1.Auth{{URL: "a.example", CustomCAData: data}}}
		u, _ := url.Parse("https://a.example/index.yaml")
		_, err := c.repoAuthFor(context.Background(), u)
		if err == nil || !strings.Contains(err.Error(), "Context ns/ctx configurations.helmChartRepoCredentials.auths[0]."+want) {
			t.Errorf("got %v, want %s", err, want)
		}
	}
}

func TestRegistryHost(t *testing.T) {
	cases := map[string]string{
		"https://index.docker.io/v1/": "docker.io", "registry.example:5000": "registry.example:5000",
		"http://registry.example/v2/": "registry.example", "registry-1.docker.io": "docker.io",
	}
	for in, want := range cases {
		if got := registryHost(in); got != want {
			t.Errorf("registryHost(%q) = %q, want %q", in, got, want)
		}
	}
}
