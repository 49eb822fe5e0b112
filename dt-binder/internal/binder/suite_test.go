package binder_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// One API server for the package; every test gets namespaces of its own and a
// binder whose cache sees only those, so tests do not disturb each other.
var env *testenv.Env

// Bounded waits: generous for a shared 2-core machine, short enough to fail fast.
const (
	timeout     = 30 * time.Second
	poll        = 50 * time.Millisecond
	consistency = 2 * time.Second
)

func TestMain(m *testing.M) {
	scheme, err := app.Scheme()
	if err != nil {
		panic(err)
	}
	// Logs show up for failed tests; DT_BINDER_TEST_DEBUG=1 adds the debug level.
	level := zapcore.InfoLevel
	if os.Getenv("DT_BINDER_TEST_DEBUG") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(crzap.New(crzap.WriteTo(os.Stderr), crzap.UseDevMode(true), crzap.Level(level)))
	os.Exit(testenv.RunMain(m, scheme, &env))
}

var nsCounter atomic.Int64

// newNamespace creates a fresh namespace (envtest has no namespace
// controller, so namespaces are never reused).
func newNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("dtb-%d-%d", time.Now().UnixNano()%1_000_000_000, nsCounter.Add(1))
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// startBinder runs the dt-binder (both reconcilers) in a manager of its own
// until the test ends, or until the stop function it returns is called (it
// returns once the binder has stopped; a test may start another).
func startBinder(t testing.TB, opts binder.Options, namespaces ...string) (stop func()) {
	t.Helper()
	nss := map[string]cache.Config{}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	ctrlCfg := manager.Options{Concurrency: 8}.ControllerConfig()
	// Every test builds its own manager in one process; the controller
	// names repeat.
	ctrlCfg.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: nss},
		Controller:             ctrlCfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := binder.AddToManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("binder manager: %v", err)
		}
	})
	t.Cleanup(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, timeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("binder cache did not sync")
	}
	return stop
}

func newClass(t testing.TB, policy appstudiov1alpha1.ReclaimPolicy) *appstudiov1alpha1.DeploymentTargetClass {
	t.Helper()
	c := &appstudiov1alpha1.DeploymentTargetClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cls-"},
		Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
			Provisioner:   appstudiov1alpha1.SandboxProvisioner,
			ReclaimPolicy: policy,
		},
	}
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func newTarget(ns, name, class, claimRef string, finalizers ...string) *appstudiov1alpha1.DeploymentTarget {
	dt := &appstudiov1alpha1.DeploymentTarget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
		Spec: appstudiov1alpha1.DeploymentTargetSpec{
			DeploymentTargetClassName: class,
			KubernetesClusterCredentials: appstudiov1alpha1.DeploymentTargetKubernetesClusterCredentials{
				DefaultNamespace:         ns + "-env",
				APIURL:                   "https://api.example:6443",
				ClusterCredentialsSecret: name + "-secret",
			},
		},
	}
	if claimRef != "" {
		dt.Spec.ClaimRef = &appstudiov1alpha1.DeploymentTargetClaimReference{Name: claimRef}
	}
	return dt
}

func newClaim(ns, name, class, targetName string) *appstudiov1alpha1.DeploymentTargetClaim {
	return &appstudiov1alpha1.DeploymentTargetClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: class, TargetName: targetName},
	}
}

func create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// createConcurrently creates objs from up to `workers` goroutines at once, so
// that the binder sees them arrive together.
func createConcurrently(t testing.TB, workers int, objs ...client.Object) {
	t.Helper()
	errs := make(chan error, len(objs))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := env.Client.Create(context.Background(), o); err != nil {
				errs <- fmt.Errorf("creating %s: %w", o.GetName(), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

func getClaim(g Gomega, ns, name string) *appstudiov1alpha1.DeploymentTargetClaim {
	c := &appstudiov1alpha1.DeploymentTargetClaim{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

func getTarget(g Gomega, ns, name string) *appstudiov1alpha1.DeploymentTarget {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, dt)).To(Succeed())
	return dt
}

// boundReason is the reason of the Bound condition, or "".
func boundReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, appstudiov1alpha1.ConditionBound); c != nil {
		return c.Reason
	}
	return ""
}

// eventuallyClaim waits until the claim has phase and Bound-condition reason.
func eventuallyClaim(t testing.TB, ns, name string, phase appstudiov1alpha1.DeploymentTargetClaimPhase, reason string) *appstudiov1alpha1.DeploymentTargetClaim {
	t.Helper()
	var got *appstudiov1alpha1.DeploymentTargetClaim
	NewWithT(t).Eventually(func(g Gomega) {
		got = getClaim(g, ns, name)
		g.Expect(got.Status.Phase).To(Equal(phase), "claim %s phase; conditions %+v", name, got.Status.Conditions)
		g.Expect(boundReason(got.Status.Conditions)).To(Equal(reason))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return got
}

// eventuallyTarget waits until the target has phase and claimRef (empty: none).
func eventuallyTarget(t testing.TB, ns, name string, phase appstudiov1alpha1.DeploymentTargetPhase, claimRef string) *appstudiov1alpha1.DeploymentTarget {
	t.Helper()
	var got *appstudiov1alpha1.DeploymentTarget
	NewWithT(t).Eventually(func(g Gomega) {
		got = getTarget(g, ns, name)
		g.Expect(got.Status.Phase).To(Equal(phase), "target %s phase; conditions %+v", name, got.Status.Conditions)
		g.Expect(claimRefName(got)).To(Equal(claimRef))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return got
}

func claimRefName(dt *appstudiov1alpha1.DeploymentTarget) string {
	if dt.Spec.ClaimRef == nil {
		return ""
	}
	return dt.Spec.ClaimRef.Name
}

// eventuallyGone waits until obj no longer exists.
func eventuallyGone(t testing.TB, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "%T %s still exists", obj, obj.GetName())
}

// removeFinalizer plays the provisioner's part: it removes a target's finalizer.
func removeFinalizer(t testing.TB, obj client.Object, finalizer string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var keep []string
		for _, f := range obj.GetFinalizers() {
			if f != finalizer {
				keep = append(keep, f)
			}
		}
		obj.SetFinalizers(keep)
		return env.Client.Update(context.Background(), obj)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
