package spacerequest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/spacerequest-stub/controllers"
)

// terminationTimeout is short so that UnableToTerminate shows within a test.
const terminationTimeout = 4 * time.Second

var env *testenv.Env

// TestMain starts one API server for the package and runs the stub's
// reconciler against it in-process, configured as the binary would be. It
// does what testenv.RunMain does, plus stopping the manager before the API
// server so that shutdown logs no connection errors.
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
	log, err := manager.SetupLogging(controllers.Component, manager.Options{LogLevel: "info", LogFormat: "console"})
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             manager.Options{Concurrency: 2}.ControllerConfig(),
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.AddToManager(mgr, controllers.Options{TerminationTimeout: terminationTimeout}); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager stopped: %v\n", err)
		}
	}()
	return done, nil
}
