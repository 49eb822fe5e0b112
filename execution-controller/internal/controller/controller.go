package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/terrace-dev/terrace/execution-controller/internal/controller/execution"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/execution-controller/internal/notes"
)

// FieldManager is the server-side apply field manager of every write the
// execution controller makes, so each field it owns is attributable to it
// and a deployer's fields are never overwritten.
const FieldManager = "execution-controller"

// Options configure the execution controller.
type Options struct {
	// Timeouts are the deploy-item pickup, progressing and abort timeouts
	// and the pickup warning.
	Timeouts timeouts.Config
	// Controller overrides per-controller options (zero: the manager's defaults).
	Controller controller.Options
	// OwnerRecheck is how often a deleted execution that waits for its
	// installation to hand over a deletion job re-reads that installation
	// (zero: execution.DefaultOwnerRecheck). A safety net: the hand-over
	// normally comes within moments; the re-read notices an installation
	// that went without handing over (its finalizer removed by hand), of
	// which this controller, caching no installations, gets no event.
	OwnerRecheck time.Duration
	// NameRecheck is how often a job that waits for a namesake deploy item
	// or exports DataObject to go (DeployItemNameTaken, DataObjectNameTaken)
	// is reconciled without an event (zero: execution.DefaultNameRecheck). A
	// safety net: the namesake's own events wake the execution.
	NameRecheck time.Duration
}

// DefaultOptions returns the defaults of seed 001 (5m pickup, 10m progressing,
// 5m abort) and a 1m pickup warning.
func DefaultOptions() Options {
	return Options{Timeouts: timeouts.DefaultConfig()}
}

// BindFlags registers --pickup-timeout, --pickup-warning,
// --progressing-timeout and --abort-timeout; each takes a Go duration or
// "none". Values already set in o become the defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.Var(&o.Timeouts.Pickup, "pickup-timeout",
		`How long a deploy item may keep its reconcile-time annotation (no deployer picked it up) before it is set to Failed; "none" disables the check.`)
	fs.Var(&o.Timeouts.PickupWarning, "pickup-warning",
		`How long a deploy item may keep its reconcile-time annotation (no deployer picked it up) before a Warning event WaitingForPickup on the item and its Execution says so, once per hand-over; "none" disables it.`)
	fs.Var(&o.Timeouts.Progressing, "progressing-timeout",
		`Default progressing timeout for deploy items without spec.timeout: after it, operation: abort is set; "none" disables the check.`)
	fs.Var(&o.Timeouts.Abort, "abort-timeout",
		`How long a deploy item may take to abort before it is set to Failed; "none" disables the check.`)
}

// AddToManager registers the Execution reconciler and the DeployItem
// timeouts reconciler with mgr.
func AddToManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	exec := &execution.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     notes.Recorder(mgr.GetEventRecorder(FieldManager)),
		FieldManager: FieldManager,
		OwnerRecheck: opts.OwnerRecheck,
		NameRecheck:  opts.NameRecheck,
	}
	if err := exec.SetupWithManager(ctx, mgr, opts.Controller); err != nil {
		return fmt.Errorf("setting up the execution reconciler: %w", err)
	}
	to := &timeouts.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     notes.Recorder(mgr.GetEventRecorder(FieldManager)),
		FieldManager: FieldManager,
		Config:       opts.Timeouts,
	}
	if err := to.SetupWithManager(mgr, opts.Controller); err != nil {
		return fmt.Errorf("setting up the deploy-item timeouts reconciler: %w", err)
	}
	return nil
}
