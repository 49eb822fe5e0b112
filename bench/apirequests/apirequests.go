// Package apirequests counts the requests kube-apiserver serves, attributed to
// the process that sent them, from kube-apiserver's own /metrics.
//
// kube-apiserver's apiserver_request_total has labels for verb and resource
// but none for the user, so on its own it cannot tell a controller's requests
// from a test's, kube-controller-manager's or kube-apiserver's own. API
// Priority and Fairness can: every request is classified by the first
// FlowSchema (in matchingPrecedence order) whose rules match its user, verb
// and resource, and kube-apiserver counts it, when it starts executing it
// (watches included), in apiserver_flowcontrol_dispatched_requests_total
// {flow_schema=...} (or in ..._rejected_requests_total when it is refused).
//
// Install creates, for each Process (a ServiceAccount), one FlowSchema per
// verb and resource the process is granted (its ClusterRole's rules) and one
// catch-all for anything else, all ahead of the built-in FlowSchemas and all
// sending the requests to the priority level the built-in "service-accounts"
// FlowSchema would (workload-low, fair queuing by user). So the requests are
// handled as before; only the name they are counted under changes, and the
// delta of those counters between two Scrapes is exactly what each process
// sent, by verb and resource. (One difference remains: fair queuing now sees
// one flow per FlowSchema instead of one per user; it only matters when the
// priority level is saturated and requests queue.) Server-side apply counts as
// patch (its RBAC verb).
//
// ClientCounter counts a client's own requests on the client side, so that a
// benchmark or test can subtract them from the apiserver_request_total delta.
package apirequests

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	// NamePrefix starts the name of every FlowSchema Install creates.
	NamePrefix = "terrace-count."
	// Label marks every FlowSchema Install creates.
	Label = "terrace.dev/api-request-counting"

	// The FlowSchemas come before every built-in one that could match a
	// ServiceAccount (system-leader-election is 100, service-accounts 9000),
	// after exempt (1) and probes (2).
	precedence         = 40
	catchAllPrecedence = 45

	// serviceAccountsFlowSchema is the built-in FlowSchema whose priority
	// level and distinguisher the counting FlowSchemas copy.
	serviceAccountsFlowSchema = "service-accounts"
)

// allVerbs are the request verbs a "*" in a rule stands for.
var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// Process is a sender of requests: every request of its ServiceAccount counts
// for it.
type Process struct {
	// Name names the process in the counts, e.g. "installation-controller".
	Name string
	// Namespace and ServiceAccount are its identity.
	Namespace, ServiceAccount string
	// Rules are the verbs and resources counted one by one, typically the
	// rules of the process's ClusterRole. Requests outside them (discovery,
	// anything forbidden) are counted together as Other.
	Rules []rbacv1.PolicyRule
}

// Other is the Verb and Resource of a process's requests that no rule names.
const Other = "other"

// Key is one line of a breakdown.
type Key struct {
	Process string `json:"process"`
	// Verb is the request's RBAC verb (server-side apply is "patch"), or Other.
	Verb string `json:"verb"`
	// Resource is "<resource>[.<group>][/<subresource>]", "*" for any, or Other.
	Resource string `json:"resource"`
}

// Counter reads the counts of the FlowSchemas Install created.
type Counter struct {
	cs        kubernetes.Interface
	schemas   map[string]Key
	processes []string
}

// Install creates (or updates) the counting FlowSchemas for procs and waits
// until kube-apiserver classifies requests with them.
func Install(ctx context.Context, cs kubernetes.Interface, procs []Process) (*Counter, error) {
	plName, distinguisher := "workload-low", &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType}
	if sa, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, serviceAccountsFlowSchema, metav1.GetOptions{}); err == nil {
		plName, distinguisher = sa.Spec.PriorityLevelConfiguration.Name, sa.Spec.DistinguisherMethod
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading FlowSchema %s: %w", serviceAccountsFlowSchema, err)
	}

	c := &Counter{cs: cs, schemas: map[string]Key{}}
	var schemas []*flowcontrolv1.FlowSchema
	for _, p := range procs {
		c.processes = append(c.processes, p.Name)
		subject := flowcontrolv1.Subject{
			Kind:           flowcontrolv1.SubjectKindServiceAccount,
			ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: p.Namespace, Name: p.ServiceAccount},
		}
		newSchema := func(name string, key Key, prec int32, rule flowcontrolv1.PolicyRulesWithSubjects) error {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return fmt.Errorf("FlowSchema name %q: %s", name, strings.Join(errs, "; "))
			}
			if _, dup := c.schemas[name]; dup {
				return nil
			}
			rule.Subjects = []flowcontrolv1.Subject{subject}
			c.schemas[name] = key
			schemas = append(schemas, &flowcontrolv1.FlowSchema{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{Label: "true"}},
				Spec: flowcontrolv1.FlowSchemaSpec{
					PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: plName},
					MatchingPrecedence:         prec,
					DistinguisherMethod:        distinguisher,
					Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
				},
			})
			return nil
		}
		for _, r := range p.Rules {
			// Only request verbs: bind, escalate, impersonate, use are
			// checked by authorization but are no request of their own.
			verbs := slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return !slices.Contains(allVerbs, v) })
			if slices.Contains(r.Verbs, "*") {
				verbs = allVerbs
			}
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					for _, verb := range verbs {
						name := NamePrefix + p.Name + "." + verb + "." + nameSegment(resource) + "." + groupSegment(group)
						key := Key{Process: p.Name, Verb: verb, Resource: resourceName(resource, group)}
						if err := newSchema(name, key, precedence, flowcontrolv1.PolicyRulesWithSubjects{
							ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
								Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource},
								ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
							}},
						}); err != nil {
							return nil, err
						}
					}
				}
			}
		}
		if err := newSchema(NamePrefix+p.Name, Key{Process: p.Name, Verb: Other, Resource: Other}, catchAllPrecedence,
			flowcontrolv1.PolicyRulesWithSubjects{
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
					Resources: []string{flowcontrolv1.ResourceAll}, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
					Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
				}},
			}); err != nil {
			return nil, err
		}
	}

	for _, fs := range schemas {
		if err := createOrUpdate(ctx, cs, fs); err != nil {
			return nil, err
		}
	}
	// kube-apiserver's APF configuration controller writes Dangling=False
	// once it has taken a FlowSchema in (and found its priority level).
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{LabelSelector: Label})
		if err != nil {
			return false, err
		}
		taken := map[string]bool{}
		for _, fs := range list.Items {
			for _, cond := range fs.Status.Conditions {
				if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionFalse {
					taken[fs.Name] = true
				}
			}
		}
		for name := range c.schemas {
			if !taken[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for kube-apiserver to take the counting FlowSchemas in: %w", err)
	}
	return c, nil
}

func createOrUpdate(ctx context.Context, cs kubernetes.Interface, fs *flowcontrolv1.FlowSchema) error {
	_, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, getErr := cs.FlowcontrolV1().FlowSchemas().Get(ctx, fs.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		cur.Spec, cur.Labels = fs.Spec, fs.Labels
		_, err = cs.FlowcontrolV1().FlowSchemas().Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("FlowSchema %s: %w", fs.Name, err)
	}
	return nil
}

func nameSegment(resource string) string {
	if resource == "*" {
		return "any"
	}
	return strings.ReplaceAll(resource, "/", "-")
}

func groupSegment(group string) string {
	switch group {
	case "":
		return "core"
	case "*":
		return "any-group"
	}
	return group
}

// resourceName is "<resource>[.<group>][/<subresource>]", as RequestKey writes it.
func resourceName(resource, group string) string {
	if resource == "*" {
		return "*"
	}
	res, sub, _ := strings.Cut(resource, "/")
	if group != "" && group != "*" {
		res += "." + group
	}
	if sub != "" {
		res += "/" + sub
	}
	return res
}

// Processes are the names of the processes, in the order Install got them.
func (c *Counter) Processes() []string { return slices.Clone(c.processes) }

// Scrape reads kube-apiserver's /metrics.
func (c *Counter) Scrape(ctx context.Context) (*Snapshot, error) {
	return Scrape(ctx, c.cs)
}

// Delta is what each process sent between two snapshots.
func (c *Counter) Delta(before, after *Snapshot) Counts {
	out := Counts{}
	for name, key := range c.schemas {
		if n := int(after.FlowSchemas[name] - before.FlowSchemas[name]); n != 0 {
			out[key] += n
		}
	}
	return out
}

// Totals is what each process has sent in all (since Install), by process.
func (c *Counter) Totals(s *Snapshot) map[string]int {
	out := map[string]int{}
	for _, p := range c.processes {
		out[p] = 0
	}
	for name, key := range c.schemas {
		out[key.Process] += int(s.FlowSchemas[name])
	}
	return out
}

// WaitQuiet waits until no process has sent a request for window, or
// timeout passed (an error then). Metrics cannot be watched: it scrapes every
// 500ms (kube-apiserver's /metrics is megabytes; scraping it costs CPU).
func (c *Counter) WaitQuiet(ctx context.Context, window, timeout time.Duration) error {
	var last map[string]int
	lastChange := time.Now()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := c.Scrape(ctx)
		if err != nil {
			return err
		}
		cur := c.Totals(s)
		if !maps.Equal(cur, last) {
			last, lastChange = cur, time.Now()
		} else if time.Since(lastChange) >= window {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes still sent requests after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Counts are requests by process, verb and resource.
type Counts map[Key]int

// Total is the sum of all counts.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// ByProcess sums the counts by process.
func (c Counts) ByProcess() map[string]int {
	out := map[string]int{}
	for k, v := range c {
		out[k.Process] += v
	}
	return out
}

// Entry is one line of Counts.
type Entry struct {
	Key
	Count int `json:"count"`
}

// Entries are the counts, largest first.
func (c Counts) Entries() []Entry {
	out := make([]Entry, 0, len(c))
	for k, v := range c {
		out = append(out, Entry{Key: k, Count: v})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		if a.Process != b.Process {
			return strings.Compare(a.Process, b.Process)
		}
		if a.Resource != b.Resource {
			return strings.Compare(a.Resource, b.Resource)
		}
		return strings.Compare(a.Verb, b.Verb)
	})
	return out
}

// Write prints the counts as a table, largest first, each line indented by
// indent; per > 0 adds a column with the count divided by per.
func (c Counts) Write(w io.Writer, indent string, per float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range c.Entries() {
		var err error
		if per > 0 {
			_, err = fmt.Fprintf(tw, "%s%6d\t%8.2f\t%s\t%s\t%s\n", indent, e.Count, float64(e.Count)/per, e.Process, e.Verb, e.Resource)
		} else {
			_, err = fmt.Fprintf(tw, "%s%6d\t%s\t%s\t%s\n", indent, e.Count, e.Process, e.Verb, e.Resource)
		}
		if err != nil {
			return err
		}
	}
	return tw.Flush()
}

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
