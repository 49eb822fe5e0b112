package testutil

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// Scheme is the scheme of the binaries (built-in types and every Terrace group).
func Scheme() *runtime.Scheme {
	s, err := app.Scheme()
	if err != nil {
		panic(err)
	}
	return s
}

// StartManager starts a manager against env after register added controllers;
// it stops when the test ends.
func StartManager(t testing.TB, env *testenv.Env, register func(mgr ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	return StartManagerWithClient(t, env, nil, register)
}

// StartManagerWithClient is StartManager whose manager builds its client with
// newClient (nil: the default, reading from the manager's cache), e.g. to play
// a cache that has not seen an object yet.
func StartManagerWithClient(t testing.TB, env *testenv.Env, newClient client.NewClientFunc, register func(mgr ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             manager.Options{Concurrency: 4}.ControllerConfig(),
		NewClient:              newClient,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := register(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})
	return mgr
}

var nsCounter atomic.Int64

// Namespace creates a fresh namespace named after the test.
func Namespace(t testing.TB, env *testenv.Env) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.NewReplacer("/", "-", "_", "-").Replace(name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-")
	name = fmt.Sprintf("%s-%d", name, nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// RunMain starts one API server for the test binary, stores it in *envp,
// starts one manager with the controllers register adds (when register is
// not nil), runs the tests, then stops the manager before the API server (a
// connected manager keeps kube-apiserver from stopping in time).
func RunMain(m *testing.M, envp **testenv.Env, register func(mgr ctrl.Manager) error) int {
	if os.Getenv("TEST_LOG") == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		ctrl.SetLogger(crzap.New(crzap.UseDevMode(true)))
	}
	e, err := testenv.Start(Scheme())
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*envp = e
	stop := func() {}
	if register != nil {
		mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
			Scheme:                 e.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             manager.Options{Concurrency: 4}.ControllerConfig(),
		})
		if err == nil {
			err = register(mgr)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
			_ = e.Stop()
			return 1
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "manager: %v\n", err)
			}
		}()
		stop = func() { cancel(); <-done }
	}
	code := m.Run()
	stop()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Update reads obj afresh, applies mutate and updates it, retrying on
// conflicts: the deployers write the same objects concurrently.
func Update[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	})
}

// UpdateStatus is Update for the status subresource.
func UpdateStatus[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Status().Update(ctx, obj)
	})
}
