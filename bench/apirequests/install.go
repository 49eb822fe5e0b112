package apirequests

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// Install creates (or updates) the counting FlowSchemas for procs and waits
// until kube-apiserver classifies requests with them.
func Install(ctx context.Context, cs kubernetes.Interface, procs []Process) (*Counter, error) {
	set, err := newSchemaSet(ctx, cs)
	if err != nil {
		return nil, err
	}
	c := &Counter{cs: cs, schemas: set.keys}
	for _, p := range procs {
		c.processes = append(c.processes, p.Name)
		if err := set.addProcess(p); err != nil {
			return nil, err
		}
	}
	for _, fs := range set.schemas {
		if err := createOrUpdate(ctx, cs, fs); err != nil {
			return nil, err
		}
	}
	if err := waitTakenIn(ctx, cs, c.schemas); err != nil {
		return nil, fmt.Errorf("waiting for kube-apiserver to take the counting FlowSchemas in: %w", err)
	}
	return c, nil
}

// schemaSet collects the counting FlowSchemas of all processes, each name
// once, in the order they are created.
type schemaSet struct {
	// priorityLevel and distinguisher are those of the built-in
	// service-accounts FlowSchema, so requests are handled as without counting.
	priorityLevel string
	distinguisher *flowcontrolv1.FlowDistinguisherMethod
	keys          map[string]Key
	schemas       []*flowcontrolv1.FlowSchema
}

func newSchemaSet(ctx context.Context, cs kubernetes.Interface) (*schemaSet, error) {
	s := &schemaSet{
		priorityLevel: "workload-low",
		distinguisher: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		keys:          map[string]Key{},
	}
	if sa, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, serviceAccountsFlowSchema, metav1.GetOptions{}); err == nil {
		s.priorityLevel, s.distinguisher = sa.Spec.PriorityLevelConfiguration.Name, sa.Spec.DistinguisherMethod
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading FlowSchema %s: %w", serviceAccountsFlowSchema, err)
	}
	return s, nil
}

// addProcess adds one FlowSchema per verb, group and resource of p's rules,
// then p's catch-all.
func (s *schemaSet) addProcess(p Process) error {
	subject := flowcontrolv1.Subject{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: p.Namespace, Name: p.ServiceAccount},
	}
	for _, r := range p.Rules {
		if err := s.addRule(p.Name, subject, r); err != nil {
			return err
		}
	}
	return s.add(NamePrefix+p.Name, Key{Process: p.Name, Verb: Other, Resource: Other}, catchAllPrecedence, subject, catchAllRule())
}

func (s *schemaSet) addRule(process string, subject flowcontrolv1.Subject, r rbacv1.PolicyRule) error {
	verbs := requestVerbs(r.Verbs)
	for _, group := range r.APIGroups {
		for _, resource := range r.Resources {
			for _, verb := range verbs {
				name := NamePrefix + process + "." + verb + "." + nameSegment(resource) + "." + groupSegment(group)
				key := Key{Process: process, Verb: verb, Resource: resourceName(resource, group)}
				if err := s.add(name, key, precedence, subject, resourceRule(verb, group, resource)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// requestVerbs are the request verbs of an RBAC rule: bind, escalate,
// impersonate, use are checked by authorization but are no request of their own.
func requestVerbs(ruleVerbs []string) []string {
	if slices.Contains(ruleVerbs, "*") {
		return allVerbs
	}
	return slices.DeleteFunc(slices.Clone(ruleVerbs), func(v string) bool { return !slices.Contains(allVerbs, v) })
}

func resourceRule(verb, group, resource string) flowcontrolv1.PolicyRulesWithSubjects {
	return flowcontrolv1.PolicyRulesWithSubjects{
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource},
			ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
		}},
	}
}

// catchAllRule matches every request, resource or not; its FlowSchema comes
// after the process's others, so it gets only what they do not name.
func catchAllRule() flowcontrolv1.PolicyRulesWithSubjects {
	return flowcontrolv1.PolicyRulesWithSubjects{
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
			Resources: []string{flowcontrolv1.ResourceAll}, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
		}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
			Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
		}},
	}
}

// add adds the FlowSchema name counting under key; a name already added is
// kept as it is.
func (s *schemaSet) add(name string, key Key, prec int32, subject flowcontrolv1.Subject, rule flowcontrolv1.PolicyRulesWithSubjects) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("FlowSchema name %q: %s", name, strings.Join(errs, "; "))
	}
	if _, dup := s.keys[name]; dup {
		return nil
	}
	rule.Subjects = []flowcontrolv1.Subject{subject}
	s.keys[name] = key
	s.schemas = append(s.schemas, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{Label: "true"}},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: s.priorityLevel},
			MatchingPrecedence:         prec,
			DistinguisherMethod:        s.distinguisher,
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
		},
	})
	return nil
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

// waitTakenIn waits until kube-apiserver's APF configuration controller has
// taken every FlowSchema in schemas in: it writes Dangling=False once it has
// (and found its priority level).
func waitTakenIn(ctx context.Context, cs kubernetes.Interface, schemas map[string]Key) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{LabelSelector: Label})
		if err != nil {
			return false, err
		}
		taken := takenIn(list.Items)
		for name := range schemas {
			if !taken[name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// takenIn are the names of the FlowSchemas with Dangling=False.
func takenIn(schemas []flowcontrolv1.FlowSchema) map[string]bool {
	taken := map[string]bool{}
	for _, fs := range schemas {
		for _, cond := range fs.Status.Conditions {
			if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionFalse {
				taken[fs.Name] = true
			}
		}
	}
	return taken
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
