package spacerequest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
)

// terminationTimeout is short so that UnableToTerminate shows within a test.
const terminationTimeout = 4 * time.Second

var (
	env *testenv.Env
	// stub is the reconciler the suite runs.
	stub *spacerequest.Reconciler
	// stubConfig connects as the stub does: as the ServiceAccount
	// stubNamespace/stubServiceAccount, bound to the stub's generated
	// ClusterRole and nothing else.
	stubConfig *rest.Config
	// stubRequests records every request the stub sends.
	stubRequests = &requestLog{}
	// stubClock is the stub's clock.
	stubClock = &clock{}
)

// clock is the real time, or a time a test stopped it at.
type clock struct{ stopped atomic.Pointer[time.Time] }

func (c *clock) now() time.Time {
	if t := c.stopped.Load(); t != nil {
		return *t
	}
	return time.Now()
}

// stop stops the stub's clock at the current time until resume, or the end
// of the test: whatever the stub computes from the time (a deleted
// SpaceRequest's time left before UnableToTerminate) stays put however slow
// the machine is.
func (c *clock) stop(t *testing.T) {
	now := time.Now()
	c.stopped.Store(&now)
	t.Cleanup(c.resume)
}

// resume lets the stub's clock run again.
func (c *clock) resume() { c.stopped.Store(nil) }

// The stub's own ServiceAccount, as config/components deploys it.
const (
	stubNamespace      = "terrace-system"
	stubServiceAccount = "spacerequest-stub"
	// generatedRole is the stub's ClusterRole, generated from the
	// +kubebuilder:rbac markers (make generate-rbac).
	generatedRole = "../../../../config/rbac/spacerequest-stub/role.yaml"
	// writePolicy limits what the stub writes beyond what RBAC can say.
	writePolicy = "../../../../config/policies/spacerequest-stub.yaml"
)

// installWritePolicy installs the stub's ValidatingAdmissionPolicy and its
// binding, as make up and make deploy do, and waits until it refuses a write
// of the stub's that only the policy forbids (an unlabelled Secret).
func installWritePolicy(ctx context.Context, asStubConfig *rest.Config) error {
	data, err := os.ReadFile(writePolicy)
	if err != nil {
		return err
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		return fmt.Errorf("%s: want a policy and its binding, got %d documents", writePolicy, len(docs))
	}
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for i, o := range []client.Object{policy, binding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), o); err != nil {
			return fmt.Errorf("%s: %w", writePolicy, err)
		}
		if err := env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	asStub, err := client.New(asStubConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: stubNamespace, Name: "policy-probe"}}
		err := asStub.Create(ctx, probe)
		if refusedBy(err, policy.Name) {
			return nil // the policy is in force
		}
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
		}
		if time.Now().After(deadline) {
			// Any other error (RBAC's Forbidden, a connection error, the
			// probe left over) says nothing about the policy.
			if err == nil {
				return fmt.Errorf("the policy %s does not refuse the stub's unlabelled Secret after 30s", policy.Name)
			}
			return fmt.Errorf("the policy %s does not refuse the stub's unlabelled Secret after 30s: %w", policy.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refusedBy reports whether err is an admission policy's denial naming
// policy: a ValidatingAdmissionPolicy denies with Invalid (or Forbidden,
// depending on the validation's reason) and names itself in the message.
func refusedBy(err error, policy string) bool {
	return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// TestMain starts one API server for the package and runs the stub's
// reconciler against it in-process, configured as the binary would be and
// with the rights it has when deployed: as a ServiceAccount bound to its
// generated ClusterRole only (so every test also tests that role). It does
// what testenv.RunMain does, plus stopping the manager before the API server
// so that shutdown logs no connection errors.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	scheme, err := app.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = testenv.Start(scheme)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	if err := testenv.AggregateClusterRoles(ctx, env.Client); err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "aggregating ClusterRoles: %v\n", err)
		return 1
	}
	stubConfig, err = runAsStub(ctx)
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "running as the stub's ServiceAccount: %v\n", err)
		return 1
	}
	if err := installWritePolicy(ctx, stubConfig); err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "installing the stub's admission policy: %v\n", err)
		return 1
	}
	done, err := startManager(ctx)
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "starting manager: %v\n", err)
		return 1
	}
	code := m.Run()
	cancel()
	<-done
	return code
}

func startManager(ctx context.Context) (<-chan struct{}, error) {
	log, err := manager.SetupLogging(controller.Component, manager.Options{LogLevel: "info", LogFormat: "console"})
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(stubConfig)
	cfg.Wrap(stubRequests.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             manager.Options{Concurrency: 2}.ControllerConfig(),
	})
	if err != nil {
		return nil, err
	}
	stub, err = controller.Setup(mgr, controller.Options{TerminationTimeout: terminationTimeout})
	if err != nil {
		return nil, err
	}
	stub.SetClock(stubClock.now)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager stopped: %v\n", err)
		}
	}()
	return done, nil
}

// runAsStub creates the stub's ServiceAccount, its generated ClusterRole and
// a binding, and returns a config that authenticates with a token of that
// ServiceAccount (as the deployed stub does), once RBAC lets it list what the
// stub lists.
func runAsStub(ctx context.Context) (*rest.Config, error) {
	data, err := os.ReadFile(generatedRole)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		return nil, fmt.Errorf("%s: %w", generatedRole, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stubNamespace, Name: stubServiceAccount}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stubNamespace}},
		sa,
		role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: stubNamespace, Name: stubServiceAccount}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	// The RBAC authorizer sees the new binding a moment later.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.List(ctx, &corev1.NamespaceList{}, client.MatchingLabels{spacerequest.ManagedByLabel: spacerequest.ManagedByValue})
		if err == nil {
			return cfg, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the stub's ServiceAccount cannot list namespaces: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// request is one request the stub sent.
type request struct {
	at     time.Time
	method string
	url    *url.URL
}

// verb is the request's Kubernetes verb as far as a test needs it: list and
// watch apart from get.
func (r request) verb() string {
	switch {
	case r.method == http.MethodGet && r.url.Query().Get("watch") == "true":
		return "watch"
	case r.method == http.MethodGet && r.isCollection():
		return "list"
	default:
		return strings.ToLower(r.method)
	}
}

// parts is the request's path after the API group and version and, for a
// namespaced resource, after "namespaces/<namespace>": [resource],
// [resource, name] or [resource, name, subresource].
func (r request) parts() []string {
	p := strings.Split(strings.Trim(r.url.Path, "/"), "/")
	switch {
	case len(p) >= 3 && p[0] == "apis":
		p = p[3:]
	case len(p) >= 2 && p[0] == "api":
		p = p[2:]
	}
	namespaceSubresource := len(p) == 3 && (p[2] == "status" || p[2] == "finalize")
	if len(p) > 2 && p[0] == "namespaces" && !namespaceSubresource {
		p = p[2:]
	}
	return p
}

// resource is the request's resource, with its subresource.
func (r request) resource() string {
	p := r.parts()
	switch len(p) {
	case 0:
		return ""
	case 3:
		return p[0] + "/" + p[2]
	default:
		return p[0]
	}
}

func (r request) isCollection() bool { return len(r.parts()) == 1 }

func (r request) String() string { return strings.ToUpper(r.verb()) + " " + r.url.RequestURI() }

// requestLog records requests.
type requestLog struct {
	mu       sync.Mutex
	requests []request
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.requests = append(l.requests, request{at: time.Now(), method: req.Method, url: req.URL})
		l.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" &&
			(req.URL.Path == "/api/v1/namespaces" || req.URL.Path == "/api/v1/secrets") {
			resp.Body = &laggingBody{ReadCloser: resp.Body, namespaces: req.URL.Path == "/api/v1/namespaces"}
		}
		return resp, err
	})
}

// watchLag, when positive, holds back every piece of the stub's watch streams
// of namespaces and Secrets (the kinds it creates) this long: its caches of
// them lag behind the API server, behind its cache of SpaceRequests and
// behind its own writes, as a loaded informer may.
var watchLag atomic.Int64

// namespaceWatchHeld, when set, holds back the stub's watch stream of
// namespaces until it is closed (see holdNamespaceWatch).
var namespaceWatchHeld atomic.Pointer[chan struct{}]

// holdNamespaceWatch holds back what the stub's watch of namespaces
// delivers, from now until the returned release (also called when the test
// ends): its cache of namespaces stands still.
func holdNamespaceWatch(t *testing.T) (release func()) {
	held := make(chan struct{})
	namespaceWatchHeld.Store(&held)
	var once sync.Once
	release = func() {
		once.Do(func() {
			namespaceWatchHeld.Store(nil)
			close(held)
		})
	}
	t.Cleanup(release)
	return release
}

// laggingBody is a watch stream that watchLag (and, for namespaces,
// namespaceWatchHeld) holds back.
type laggingBody struct {
	io.ReadCloser
	namespaces bool
}

func (b *laggingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if d := time.Duration(watchLag.Load()); d > 0 && n > 0 {
		time.Sleep(d)
	}
	if held := namespaceWatchHeld.Load(); held != nil && b.namespaces && n > 0 {
		<-*held
	}
	return n, err
}

// since returns the requests sent at or after t.
func (l *requestLog) since(t time.Time) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, r := range l.requests {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
