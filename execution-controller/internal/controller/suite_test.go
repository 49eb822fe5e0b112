package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/kit/testlog"
)

// One API server for the package; every test gets its own namespace and its
// own manager (execution controller + the test deployer of mock items) watching only it.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	scheme, err := app.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testenv.RunMain(m, scheme, &env))
}

// zapLevel keeps test output quiet unless TEST_LOG=debug.
func zapLevel() zapcore.Level {
	if os.Getenv("TEST_LOG") == "debug" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

const (
	// eventually bounds every wait: generous for a shared 2-core machine,
	// but never minutes.
	eventually = 30 * time.Second
	poll       = 50 * time.Millisecond
)

var nsCounter atomic.Int64

// newNamespace creates a fresh namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e6, nsCounter.Add(1))}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// running is one started manager.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// startManager runs the execution controller (with opts) and the test
// deployer against the test API server, restricted to namespace ns. It stops
// when the test ends (or earlier via the returned stop).
func startManager(t testing.TB, ns string, opts controller.Options) *running {
	t.Helper()
	return startManagerWith(t, ns, opts, nil)
}

// startManagerWith is startManager with the manager's rest config passed
// through wrap first (e.g. to count its requests), when wrap is not nil.
func startManagerWith(t testing.TB, ns string, opts controller.Options, wrap func(*rest.Config)) *running {
	t.Helper()
	return startManagerLoggingTo(t, ns, opts, wrap, nil)
}

// startManagerLogging is startManager with the manager's log (info and
// errors: what a deployment logs by default) collected for the test.
func startManagerLogging(t testing.TB, ns string, opts controller.Options) (*running, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	return startManagerLoggingTo(t, ns, opts, nil, logs), logs
}

// startManagerLoggingTo is startManagerWith with the manager's log written
// to logs, when logs is not nil.
func startManagerLoggingTo(t testing.TB, ns string, opts controller.Options, wrap func(*rest.Config), logs *testlog.Buffer) *running {
	t.Helper()
	return startManagerOver(t, []string{ns}, opts, wrap, logs)
}

// startManagerIn is startManager watching several namespaces (tenants) at once.
func startManagerIn(t testing.TB, opts controller.Options, namespaces ...string) *running {
	t.Helper()
	return startManagerOver(t, namespaces, opts, nil, nil)
}

// startManagerOver is startManagerLoggingTo watching the given namespaces.
func startManagerOver(t testing.TB, namespaces []string, opts controller.Options, wrap func(*rest.Config), logs *testlog.Buffer) *running {
	t.Helper()
	watched := map[string]cache.Config{}
	for _, ns := range namespaces {
		watched[ns] = cache.Config{}
	}
	ctrlCfg := manager.Options{Concurrency: 4}.ControllerConfig()
	// Several managers run in one process over the tests' lifetime.
	ctrlCfg.SkipNameValidation = ptr.To(true)
	// The binary's client rate limits (kit/manager), so the benchmark
	// measures what a deployment gets.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = manager.DefaultKubeAPIQPS, manager.DefaultKubeAPIBurst
	if wrap != nil {
		wrap(cfg)
	}
	mgrOpts := ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// As kit/manager caches: without managedFields.
		Cache:      cache.Options{DefaultNamespaces: watched, DefaultTransform: cache.TransformStripManagedFields()},
		Controller: ctrlCfg,
	}
	if logs != nil {
		mgrOpts.Logger = zap.New(zap.WriteTo(logs), zap.Level(zapcore.InfoLevel))
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.AddToManager(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatal(err)
	}
	// The tests play the deployer of mock items themselves.
	if err := addTestDeployer(mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// testOptions are the defaults with the given timeouts overridden.
func testOptions(mod ...func(*controller.Options)) controller.Options {
	o := controller.DefaultOptions()
	for _, m := range mod {
		m(&o)
	}
	return o
}

// mockItem is a spec entry of a mock item (served by the test deployer).
func mockItem(name string, cfg mockv1alpha1.ProviderConfiguration, dependsOn ...string) lsv1alpha1.DeployItemTemplate {
	cfg.APIVersion = mockv1alpha1.SchemeGroupVersion.String()
	cfg.Kind = "ProviderConfiguration"
	raw, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return lsv1alpha1.DeployItemTemplate{
		Name: name, Type: lsv1alpha1.MockDeployItemType, DependsOn: dependsOn,
		Config: runtime.RawExtension{Raw: raw},
	}
}

func export(v string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(v)} }

func delay(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// newExecution builds a root execution that starts a job at once
// (operation: reconcile).
func newExecution(ns, name string, items ...lsv1alpha1.DeployItemTemplate) *lsv1alpha1.Execution {
	return &lsv1alpha1.Execution{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)},
		},
		Spec: lsv1alpha1.ExecutionSpec{DeployItems: items},
	}
}

func getExec(g Gomega, exec *lsv1alpha1.Execution) *lsv1alpha1.Execution {
	cur := &lsv1alpha1.Execution{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(exec), cur)).To(Succeed())
	return cur
}

// waitFinished waits until the execution's job ended and returns it.
func waitFinished(t testing.TB, exec *lsv1alpha1.Execution) *lsv1alpha1.Execution {
	t.Helper()
	return waitFinishedWithin(t, exec, eventually)
}

func waitFinishedWithin(t testing.TB, exec *lsv1alpha1.Execution, timeout time.Duration) *lsv1alpha1.Execution {
	t.Helper()
	var cur *lsv1alpha1.Execution
	NewWithT(t).Eventually(func(g Gomega) {
		cur = getExec(g, exec)
		g.Expect(cur.Status.JobID).NotTo(BeEmpty())
		g.Expect(cur.Status.JobIDFinished).To(Equal(cur.Status.JobID))
		g.Expect(cur.Status.Phase.IsFinal()).To(BeTrue(), "phase %s", cur.Status.Phase)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return cur
}

func getItem(g Gomega, ns, exec, item string) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: execution.ItemObjectName(exec, item)}, di)).To(Succeed())
	return di
}

func listItems(g Gomega, ns string) []lsv1alpha1.DeployItem {
	list := &lsv1alpha1.DeployItemList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// recorder records every change of the deploy items of a namespace, in the
// API server's order, so tests can assert on the order things happened in.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	typ  watch.EventType
	item lsv1alpha1.DeployItem
}

func record(t testing.TB, ns string) *recorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &lsv1alpha1.DeployItemList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r := &recorder{}
	go func() {
		for ev := range w.ResultChan() {
			di, ok := ev.Object.(*lsv1alpha1.DeployItem)
			if !ok {
				continue
			}
			r.mu.Lock()
			r.events = append(r.events, recorded{typ: ev.Type, item: *di.DeepCopy()})
			r.mu.Unlock()
		}
	}()
	return r
}

// first returns the index of the first recorded event matching f, or -1.
func (r *recorder) first(f func(recorded) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.events {
		if f(e) {
			return i
		}
	}
	return -1
}

func itemLabel(e recorded) string { return e.item.Labels[lsv1alpha1.ExecutionItemNameLabel] }

// handed: the item got job.
func handed(item, job string) func(recorded) bool {
	return func(e recorded) bool { return itemLabel(e) == item && e.item.Status.JobID == job }
}

// succeeded: the item finished job successfully.
func succeeded(item, job string) func(recorded) bool {
	return func(e recorded) bool {
		return itemLabel(e) == item && e.item.Status.JobIDFinished == job && e.item.Status.Phase == lsv1alpha1.PhaseSucceeded
	}
}

func deletionStarted(item string) func(recorded) bool {
	return func(e recorded) bool { return itemLabel(e) == item && e.item.DeletionTimestamp != nil }
}

func gone(item string) func(recorded) bool {
	return func(e recorded) bool { return itemLabel(e) == item && e.typ == watch.Deleted }
}

func mockv1alpha1Config() mockv1alpha1.ProviderConfiguration {
	return mockv1alpha1.ProviderConfiguration{}
}

// waitRecorded waits until the (asynchronous) watch delivered an event
// matching f, so order assertions never look at a stream still in flight.
func (r *recorder) waitRecorded(t testing.TB, f func(recorded) bool) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return r.first(f) }).
		WithTimeout(eventually).WithPolling(poll).Should(BeNumerically(">=", 0))
}
