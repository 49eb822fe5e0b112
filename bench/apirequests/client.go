package apirequests

import (
	"maps"
	"net/http"
	"strings"
	"sync"
)

// ClientCounter counts a client's requests by RequestKey, except watches:
// kube-apiserver counts a watch in apiserver_request_total only when it ends.
type ClientCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap is a rest.Config WrapTransport.
func (cc *ClientCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if verb, key := ClientRequestKey(req); verb != "WATCH" {
			cc.mu.Lock()
			if cc.counts == nil {
				cc.counts = map[string]int{}
			}
			cc.counts[key]++
			cc.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Reset forgets the counts.
func (cc *ClientCounter) Reset() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.counts = map[string]int{}
}

// Counts are the requests since the last Reset.
func (cc *ClientCounter) Counts() map[string]int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return maps.Clone(cc.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ClientRequestKey names a request as kube-apiserver's request info does
// for the URL forms client-go sends: its verb and RequestKey.
func ClientRequestKey(req *http.Request) (verb, key string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group = parts[1]
		parts = parts[3:]
	default:
		return req.Method, RequestKey(req.Method, "", "", req.URL.Path)
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/<namespace>/<resource>/...
	}
	var resource, name, sub string
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch w := req.URL.Query().Get("watch"); {
		case w == "true" || w == "1":
			verb = "WATCH"
		case name == "":
			verb = "LIST"
		default:
			verb = "GET"
		}
	case http.MethodPatch:
		verb = "PATCH"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "APPLY"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if name == "" {
			verb = "DELETECOLLECTION"
		}
	default:
		verb = req.Method
	}
	return verb, RequestKey(verb, group, resource, sub)
}
