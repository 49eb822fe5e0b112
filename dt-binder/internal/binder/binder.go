package binder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/claim"
	"github.com/terrace-dev/terrace/dt-binder/internal/controller/target"
	"github.com/terrace-dev/terrace/kit/status"
)

// Options are the dt-binder's own settings (beside kit/manager's shared ones).
type Options struct {
	// UnableToTerminateTimeout: a target whose SpaceRequest reports
	// UnableToTerminate and still exists this long after its deletion began
	// turns Failed. Zero means 2 minutes.
	UnableToTerminateTimeout time.Duration
	// BindRetryInterval is how soon a claim that lost every race for a free
	// target tries again. Zero means 500ms.
	BindRetryInterval time.Duration
	// MaxConcurrentReconciles per controller; zero means the manager's
	// default (--concurrency).
	MaxConcurrentReconciles int
}

// BindFlags registers the options as flags on fs. Fields already set become
// the flags' defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	if o.UnableToTerminateTimeout == 0 {
		o.UnableToTerminateTimeout = target.DefaultUnableToTerminateTimeout
	}
	if o.BindRetryInterval == 0 {
		o.BindRetryInterval = claim.DefaultRetryInterval
	}
	fs.DurationVar(&o.UnableToTerminateTimeout, "unable-to-terminate-timeout", o.UnableToTerminateTimeout,
		"How long after its deletion a DeploymentTarget's SpaceRequest may still exist, reporting Ready reason UnableToTerminate, before the target's phase becomes Failed (counted from the SpaceRequest's deletionTimestamp).")
	fs.DurationVar(&o.BindRetryInterval, "bind-retry-interval", o.BindRetryInterval,
		"How soon a claim that lost every race for a free DeploymentTarget looks again.")
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.UnableToTerminateTimeout < 0 {
		errs = append(errs, fmt.Errorf("--unable-to-terminate-timeout: must not be negative, got %s", o.UnableToTerminateTimeout))
	}
	if o.BindRetryInterval < 0 {
		errs = append(errs, fmt.Errorf("--bind-retry-interval: must not be negative, got %s", o.BindRetryInterval))
	}
	if o.MaxConcurrentReconciles < 0 {
		errs = append(errs, fmt.Errorf("MaxConcurrentReconciles: must not be negative, got %d", o.MaxConcurrentReconciles))
	}
	return errors.Join(errs...)
}

// AddToManager registers the field indexes and both reconcilers with mgr.
// Every write goes out with the field manager "dt-binder".
func AddToManager(mgr ctrl.Manager, opts Options) error {
	if mgr == nil {
		return errors.New("dt-binder: manager is nil")
	}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("dt-binder: %w", err)
	}
	if err := binding.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("dt-binder: %w", err)
	}
	c := client.WithFieldOwner(mgr.GetClient(), binding.FieldOwner)
	recorder := status.BoundedRecorder(mgr.GetEventRecorder(binding.FieldOwner))
	copts := controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}

	cr := &claim.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), Recorder: recorder, RetryInterval: opts.BindRetryInterval}
	if err := cr.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("dt-binder: %w", err)
	}
	tr := &target.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), Recorder: recorder, UnableToTerminateTimeout: opts.UnableToTerminateTimeout}
	if err := tr.SetupWithManager(mgr, copts); err != nil {
		return fmt.Errorf("dt-binder: %w", err)
	}
	return nil
}
