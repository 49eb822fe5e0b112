// Package app is the main function every Terrace binary shares: flags, scheme,
// tracing, manager, signal handling. A binary only names itself and says which
// controllers it registers, so all binaries behave alike (same flags, same
// logs, same shutdown).
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	apisall "github.com/terrace-dev/terrace/apis/all"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Setup registers a binary's controllers with the manager. Binaries with
// controller-specific flags bind them in BindFlags.
type Setup struct {
	// BindFlags binds the binary's own flags beside the shared ones; optional.
	BindFlags func(fs *pflag.FlagSet)
	// Register adds the binary's controllers to the manager.
	Register func(ctx context.Context, mgr ctrl.Manager, o manager.Options) error
}

// TraceFlushTimeout bounds the flush of buffered spans when the process
// stops.
const TraceFlushTimeout = 5 * time.Second

// Scheme returns a scheme with the built-in Kubernetes types and every
// Terrace API group.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apisall.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Main parses flags, starts tracing and the manager, and blocks until SIGTERM
// or SIGINT. It exits the process with a non-zero code on failure.
func Main(component string, setup Setup) {
	if err := run(component, setup, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", component, err)
		os.Exit(1)
	}
}

func run(component string, setup Setup, args []string) error {
	var opts manager.Options
	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	opts.BindFlags(fs)
	if setup.BindFlags != nil {
		setup.BindFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}

	scheme, err := Scheme()
	if err != nil {
		return fmt.Errorf("building scheme: %w", err)
	}
	mgr, err := manager.New(component, scheme, opts)
	if err != nil {
		return err
	}
	log := mgr.GetLogger()

	ctx := ctrl.SetupSignalHandler()
	shutdownTracing, err := tracing.Setup(ctx, component)
	if err != nil {
		return fmt.Errorf("setting up tracing: %w", err)
	}
	defer func() {
		// A fresh context: ctx is already cancelled when the manager stops,
		// and spans still buffered must get a chance to leave the process.
		// Bounded: an unreachable collector must not keep a stopping process
		// alive until the kubelet kills it (terminationGracePeriodSeconds).
		flushCtx, cancel := context.WithTimeout(context.Background(), TraceFlushTimeout)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			log.Error(err, "flushing traces")
		}
	}()
	log.Info("tracing", "enabled", tracing.Enabled())

	if setup.Register != nil {
		if err := setup.Register(ctx, mgr, opts); err != nil {
			return fmt.Errorf("registering controllers: %w", err)
		}
	}
	return manager.Run(ctx, mgr)
}
