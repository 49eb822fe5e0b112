package installation_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/installation-controller/internal/executionstub"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/kit/testlog"
)

var (
	env     *testenv.Env
	scheme  *runtime.Scheme
	mgrOnce sync.Once
	mgrErr  error
	nsSeq   atomic.Int64
	// stopManager stops the manager (a no-op until it started).
	stopManager = func() {}
)

// TestMain starts one API server for the package and, on first use, one
// manager. testenv.RunMain cannot be used as is: the manager must stop
// before the API server (a connected manager keeps kube-apiserver from
// stopping in time), so this is RunMain with that one step added.
func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		ctrl.SetLogger(crzap.New(crzap.UseDevMode(true)))
	}
	var err error
	scheme, err = app.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, err = testenv.Start(scheme)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	stopManager()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

// startManager runs the installation controller and the execution stub
// (which plays the execution controller) in one manager for the whole
// package: tests use their own namespaces.
func startManager(t testing.TB) {
	t.Helper()
	mgrOnce.Do(func() {
		opts := manager.Options{Concurrency: 4}
		// In production the execution controller is a process of its own
		// with the kit's default client rate limit; in-process the stub
		// that plays it shares one client, so it gets the sum of both.
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 2*manager.DefaultKubeAPIQPS, 2*manager.DefaultKubeAPIBurst
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:     scheme,
			Metrics:    metricsserver.Options{BindAddress: "0"},
			Controller: opts.ControllerConfig(),
			Logger:     managerLogger(),
		})
		if err != nil {
			mgrErr = err
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		stopManager = func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				fmt.Fprintln(os.Stderr, "manager did not stop within 30s")
			}
		}
		if err := installation.AddToManager(ctx, mgr, installation.Options{Rechecks: noRechecks{}, MinAutomaticReconcileInterval: time.Second}); err != nil {
			mgrErr = err
			return
		}
		if err := executionstub.AddToManager(mgr); err != nil {
			mgrErr = err
			return
		}
		go func() {
			defer close(done)
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			mgrErr = fmt.Errorf("cache did not sync")
		}
	})
	if mgrErr != nil {
		t.Fatal(mgrErr)
	}
}

// managerLog holds what the shared manager logged, for the tests that check
// what a job logs (or does not: a "Reconciler error" for a mere wait). Each
// test finds its own lines by its namespace.
var managerLog = &testlog.Buffer{}

// managerLogger logs what a deployment logs by default (info and errors, as
// JSON) into managerLog; with TEST_LOG set, debug lines too, and to stderr
// as well.
func managerLogger() logr.Logger {
	if os.Getenv("TEST_LOG") == "" {
		return crzap.New(crzap.WriteTo(managerLog))
	}
	return crzap.New(crzap.UseDevMode(true), crzap.JSONEncoder(), crzap.WriteTo(io.MultiWriter(managerLog, os.Stderr)))
}

// logLines are the lines the reconciles of installation ns/name logged with
// message msg (controller-runtime names the request in every line of a
// reconcile, "Reconciler error" included).
func logLines(ns, name, msg string) []string {
	return managerLog.Lines(fmt.Sprintf(`"msg":%q`, msg), fmt.Sprintf(`"Installation":{"name":%q,"namespace":%q}`, name, ns))
}

// setup starts the controllers (once) and creates a namespace for the test.
func setup(t testing.TB) (string, Gomega) {
	t.Helper()
	startManager(t)
	ns := fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(t.Name(), "/", "-"), "_", "-")))
	if len(ns) > 60 {
		ns = ns[:60]
	}
	ns = strings.TrimRight(ns, "-")
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns, NewWithT(t)
}

// mockItem is a deploy execution rendering one mock item.
func mockItem(name, extra string) string {
	return fmt.Sprintf(`  - name: %s
    type: landscaper.gardener.cloud/mock
    config:
      apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
      kind: ProviderConfiguration
%s`, name, extra)
}

// simpleBlueprint has one deploy execution with one mock item (configured
// by itemConfig lines, indented six spaces) and exports nothing.
func simpleBlueprint(itemConfig string) map[string]string {
	return map[string]string{"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
` + indent(mockItem("item", itemConfig), 4)}
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

func newInstallation(ns, name string, fs map[string]string, annotations ...string) *lsv1alpha1.Installation {
	inst := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lsv1alpha1.InstallationSpec{
			Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: fs}},
		},
	}
	if len(annotations) > 0 {
		inst.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			inst.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return inst
}

var reconcileAnnotation = []string{lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile)}

func create(g Gomega, obj client.Object) {
	g.Expect(env.Client.Create(context.Background(), obj)).To(Succeed())
}

func getInst(ns, name string) func() (*lsv1alpha1.Installation, error) {
	return func() (*lsv1alpha1.Installation, error) {
		inst := &lsv1alpha1.Installation{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, inst)
		return inst, err
	}
}

func getExec(ns, name string) func() (*lsv1alpha1.Execution, error) {
	return func() (*lsv1alpha1.Execution, error) {
		e := &lsv1alpha1.Execution{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, e)
		return e, err
	}
}

func gone(get func() (*lsv1alpha1.Installation, error)) func() bool {
	return func() bool {
		_, err := get()
		return apierrors.IsNotFound(err)
	}
}

// inPhase matches an installation in phase p.
func inPhase(p lsv1alpha1.Phase) types.GomegaMatcher {
	return WithTransform(func(i *lsv1alpha1.Installation) lsv1alpha1.Phase { return i.Status.Phase }, Equal(p))
}

// finishedIn matches an installation that finished a job in phase p.
func finishedIn(p lsv1alpha1.Phase) types.GomegaMatcher {
	return And(
		WithTransform(func(i *lsv1alpha1.Installation) lsv1alpha1.Phase { return i.Status.Phase }, Equal(p)),
		WithTransform(func(i *lsv1alpha1.Installation) bool {
			return i.Status.JobID != "" && i.Status.JobID == i.Status.JobIDFinished
		}, BeTrue()),
	)
}

func annotate(g Gomega, obj client.Object, key, value string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	g.Expect(env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

func lastError(i *lsv1alpha1.Installation) string {
	if i.Status.LastError == nil {
		return ""
	}
	return i.Status.LastError.Reason + ": " + i.Status.LastError.Message
}

// recorder records every installation status seen by a watch in namespace
// ns, in the API server's order.
type recorder struct {
	mu     sync.Mutex
	events []lsv1alpha1.Installation
	stop   func()
}

func record(t testing.TB, ns string) *recorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &lsv1alpha1.InstallationList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				if inst, ok := ev.Object.(*lsv1alpha1.Installation); ok {
					r.mu.Lock()
					r.events = append(r.events, *inst)
					r.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(w.Stop)
	return r
}

// phases returns the distinct consecutive phases of one installation.
func (r *recorder) phases(name string) []lsv1alpha1.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lsv1alpha1.Phase
	for _, e := range r.events {
		if e.Name != name || e.Status.Phase == "" {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != e.Status.Phase {
			out = append(out, e.Status.Phase)
		}
	}
	return out
}

// index returns the position of the first recorded event matching f, -1 if none.
func (r *recorder) index(f func(*lsv1alpha1.Installation) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.events {
		if f(&r.events[i]) {
			return i
		}
	}
	return -1
}

func metaNS(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// noRechecks never re-checks a waiting phase within a test's timeout: every
// wait a test passes was ended by a watch event, as in a healthy production
// job (the re-checks are a safety net for missed events only).
type noRechecks struct{}

func (noRechecks) When(k8stypes.NamespacedName) time.Duration { return time.Hour }
func (noRechecks) Forget(k8stypes.NamespacedName)             {}
func (noRechecks) NumRequeues(k8stypes.NamespacedName) int    { return 0 }

// statuses returns the recorded versions of one installation, in order.
func (r *recorder) statuses(name string) []lsv1alpha1.Installation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lsv1alpha1.Installation
	for _, e := range r.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}
