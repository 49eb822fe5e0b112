package controller_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller"
)

var env *testenv.Env

// TestMain starts one API server for the package; each test starts (and
// stops, and restarts) the provisioner's manager in-process as it needs.
func TestMain(m *testing.M) {
	scheme, err := app.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := manager.SetupLogging(controller.Component, manager.Options{LogLevel: "info", LogFormat: "console"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testenv.RunMain(m, scheme, &env))
}

// startManager runs the provisioner's reconcilers as one process would, with
// the given number of workers per controller. The returned function stops
// it (and is also called when the test ends); several may run at once, like
// replicas without leader election.
func startManager(t *testing.T, concurrency int) func() {
	t.Helper()
	return startManagerWith(t, concurrency, controller.Options{})
}

// startManagerWith is startManager with the provisioner's options o.
func startManagerWith(t *testing.T, concurrency int, o controller.Options) func() {
	t.Helper()
	cfg := manager.Options{Concurrency: concurrency}.ControllerConfig()
	// Several managers in one test process register the same controller names.
	cfg.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 ctrl.Log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.AddToManager(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
