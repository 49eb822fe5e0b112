package apirequests

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Snapshot is what kube-apiserver's /metrics said at one time.
type Snapshot struct {
	Time time.Time
	// FlowSchemas are dispatched plus rejected requests by FlowSchema.
	FlowSchemas map[string]float64
	// Requests are apiserver_request_total by RequestKey (summed over codes).
	Requests map[string]float64
	// Conflicts are the apiserver_request_total with code 409 by RequestKey.
	Conflicts map[string]float64
}

// Scrape reads kube-apiserver's /metrics with cs's credentials.
func Scrape(ctx context.Context, cs kubernetes.Interface) (*Snapshot, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	samples, err := ParseMetrics(string(raw), "apiserver_request_total",
		"apiserver_flowcontrol_dispatched_requests_total", "apiserver_flowcontrol_rejected_requests_total")
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Time: time.Now(), FlowSchemas: map[string]float64{}, Requests: map[string]float64{}, Conflicts: map[string]float64{}}
	for _, x := range samples {
		if x.Name == "apiserver_request_total" {
			k := RequestKey(x.Labels["verb"], x.Labels["group"], x.Labels["resource"], x.Labels["subresource"])
			s.Requests[k] += x.Value
			if x.Labels["code"] == "409" {
				s.Conflicts[k] += x.Value
			}
		} else {
			s.FlowSchemas[x.Labels["flow_schema"]] += x.Value
		}
	}
	return s, nil
}

// RequestsDelta is the apiserver_request_total delta by RequestKey, minus
// own (a client's own requests, see ClientCounter); zero and negative
// results are left out.
func RequestsDelta(before, after *Snapshot, own map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after.Requests {
		if n := int(v-before.Requests[k]) - own[k]; n > 0 {
			out[k] = n
		}
	}
	return out
}

// ConflictsDelta is the delta of the requests kube-apiserver answered 409
// Conflict (a write from a stale copy: optimistic locks, already-exists), by
// RequestKey; zero results are left out.
func ConflictsDelta(before, after *Snapshot) map[string]int {
	out := map[string]int{}
	for k, v := range after.Conflicts {
		if n := int(v - before.Conflicts[k]); n > 0 {
			out[k] = n
		}
	}
	return out
}

// RequestKey names a request kind as apiserver_request_total does:
// "PATCH deployitems.landscaper.gardener.cloud/status", "GET /healthz" for a
// non-resource URL.
func RequestKey(verb, group, resource, subresource string) string {
	if resource == "" {
		return verb + " " + subresource
	}
	k := verb + " " + resource
	if group != "" {
		k += "." + group
	}
	if subresource != "" {
		k += "/" + subresource
	}
	return k
}

// SortedByCount returns the keys of m, largest count first.
func SortedByCount(m map[string]int) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	return keys
}
