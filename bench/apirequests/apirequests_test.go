package apirequests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const sampleMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="landscaper.gardener.cloud",resource="installations",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="landscaper.gardener.cloud",resource="installations",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} 1
apiserver_flowcontrol_dispatched_requests_total{flow_schema="terrace-count.mock-deployer",priority_level="workload-low"} 3
apiserver_flowcontrol_rejected_requests_total{flow_schema="terrace-count.mock-deployer",priority_level="workload-low",reason="time-out"} 1
some_metric_with_escapes{path="a\"b\\c"} 2.5e+01
plain_metric 4
`

func TestParseMetrics(t *testing.T) {
	all, err := ParseMetrics(sampleMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 7 {
		t.Fatalf("want 7 samples, got %d: %+v", len(all), all)
	}
	if got := all[5].Labels["path"]; got != `a"b\c` {
		t.Errorf("escaped label value: got %q", got)
	}
	if all[5].Value != 25 || all[6].Name != "plain_metric" || all[6].Value != 4 {
		t.Errorf("values: %+v %+v", all[5], all[6])
	}
	some, err := ParseMetrics(sampleMetrics, "apiserver_request_total")
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != 3 {
		t.Fatalf("want 3 apiserver_request_total samples, got %d", len(some))
	}
	if _, err := ParseMetrics(`broken{a="b" 1`); err == nil {
		t.Error("an unterminated label set must be an error")
	}
}

func TestRequestKey(t *testing.T) {
	for _, c := range []struct{ verb, group, resource, sub, want string }{
		{"PATCH", "landscaper.gardener.cloud", "installations", "status", "PATCH installations.landscaper.gardener.cloud/status"},
		{"GET", "", "secrets", "", "GET secrets"},
		{"GET", "", "", "/healthz", "GET /healthz"},
	} {
		if got := RequestKey(c.verb, c.group, c.resource, c.sub); got != c.want {
			t.Errorf("RequestKey(%q, %q, %q, %q) = %q, want %q", c.verb, c.group, c.resource, c.sub, got, c.want)
		}
	}
}

func TestClientRequestKey(t *testing.T) {
	for _, c := range []struct {
		method, path, contentType, wantVerb, wantKey string
	}{
		{http.MethodPost, "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/ns/installations", "", "POST", "POST installations.landscaper.gardener.cloud"},
		{http.MethodGet, "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/ns/installations/x", "", "GET", "GET installations.landscaper.gardener.cloud"},
		{http.MethodGet, "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/ns/installations", "", "LIST", "LIST installations.landscaper.gardener.cloud"},
		{http.MethodGet, "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/ns/installations?watch=true", "", "WATCH", "WATCH installations.landscaper.gardener.cloud"},
		{http.MethodPatch, "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/ns/installations/x/status", "application/merge-patch+json", "PATCH", "PATCH installations.landscaper.gardener.cloud/status"},
		{http.MethodPatch, "/api/v1/namespaces/ns/secrets/s", "application/apply-patch+yaml", "APPLY", "APPLY secrets"},
		{http.MethodPost, "/api/v1/namespaces", "", "POST", "POST namespaces"},
		{http.MethodGet, "/api/v1/namespaces/ns", "", "GET", "GET namespaces"},
		{http.MethodPost, "/api/v1/namespaces/ns/serviceaccounts/sa/token", "", "POST", "POST serviceaccounts/token"},
		{http.MethodDelete, "/api/v1/namespaces/ns/configmaps", "", "DELETECOLLECTION", "DELETECOLLECTION configmaps"},
		{http.MethodGet, "/metrics", "", "GET", "GET /metrics"},
	} {
		u, err := url.Parse("https://127.0.0.1" + c.path)
		if err != nil {
			t.Fatal(err)
		}
		req := &http.Request{Method: c.method, URL: u, Header: http.Header{}}
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		verb, key := ClientRequestKey(req)
		if verb != c.wantVerb || key != c.wantKey {
			t.Errorf("%s %s: got %q %q, want %q %q", c.method, c.path, verb, key, c.wantVerb, c.wantKey)
		}
	}
}

// Every FlowSchema name Install derives from a generated ClusterRole's rules
// is a valid object name, and keys name resources as RequestKey does.
func TestSchemaNamesAndKeys(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"landscaper.gardener.cloud"}, Resources: []string{"deployitems/status"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name := NamePrefix + "mock-deployer.patch." + nameSegment(res) + "." + groupSegment(g)
				if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
					t.Errorf("%s: %s", name, strings.Join(errs, "; "))
				}
			}
		}
	}
	if got := resourceName("deployitems/status", "landscaper.gardener.cloud"); got != "deployitems.landscaper.gardener.cloud/status" {
		t.Errorf("resourceName: %q", got)
	}
	if got := resourceName("secrets", ""); got != "secrets" {
		t.Errorf("resourceName: %q", got)
	}
	if got := resourceName("*", "*"); got != "*" {
		t.Errorf("resourceName: %q", got)
	}
}

func TestCountsAndDelta(t *testing.T) {
	c := &Counter{
		schemas: map[string]Key{
			"a": {Process: "p", Verb: "patch", Resource: "x"},
			"b": {Process: "p", Verb: Other, Resource: Other},
			"c": {Process: "q", Verb: "get", Resource: "y"},
		},
		processes: []string{"p", "q", "r"},
	}
	before := &Snapshot{FlowSchemas: map[string]float64{"a": 1, "c": 5}}
	after := &Snapshot{FlowSchemas: map[string]float64{"a": 4, "b": 2, "c": 5, "exempt": 100}}
	d := c.Delta(before, after)
	if d.Total() != 5 || d.ByProcess()["p"] != 5 || len(d) != 2 {
		t.Errorf("delta: %+v", d)
	}
	if e := d.Entries(); e[0].Count != 3 || e[0].Verb != "patch" {
		t.Errorf("entries: %+v", e)
	}
	tot := c.Totals(after)
	if tot["p"] != 6 || tot["q"] != 5 || tot["r"] != 0 {
		t.Errorf("totals: %+v", tot)
	}
	own := map[string]int{"GET /metrics": 1}
	rd := RequestsDelta(&Snapshot{Requests: map[string]float64{"GET /metrics": 3}}, &Snapshot{Requests: map[string]float64{"GET /metrics": 4, "POST x": 2}}, own)
	if len(rd) != 1 || rd["POST x"] != 2 {
		t.Errorf("RequestsDelta: %+v", rd)
	}
}
