// Package controller wires the sandbox-provisioner's reconcilers into a
// controller-runtime manager; the binary and tests call AddToManager.
package controller

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/claim"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/orphan"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller/target"
)

// Component is the binary's name, used for the event recorder.
const Component = "sandbox-provisioner"

// Options are the sandbox-provisioner's own settings. The zero value means
// the defaults.
type Options struct {
	// DefaultTierName is the SpaceRequest spec.tierName used when the claim's
	// class has no "tierName" parameter; empty means "appstudio-env".
	DefaultTierName string
	// SpaceRequestWarning is how long a claim's SpaceRequest may show
	// provisioning in progress (no Ready condition, or reason Provisioning)
	// before a Warning Event on the claim says so; zero means
	// claim.DefaultSpaceRequestWarning (1m), timeout.Disabled() none.
	SpaceRequestWarning timeout.Timeout
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	if o.DefaultTierName == "" {
		o.DefaultTierName = claim.DefaultTierName
	}
	fs.StringVar(&o.DefaultTierName, "default-tier-name", o.DefaultTierName,
		`SpaceRequest tier used when the DeploymentTargetClass has no "tierName" parameter.`)
	if o.SpaceRequestWarning == (timeout.Timeout{}) {
		o.SpaceRequestWarning = timeout.After(claim.DefaultSpaceRequestWarning)
	}
	fs.Var(&o.SpaceRequestWarning, "spacerequest-warning",
		`How long a claim's SpaceRequest may stay without a Ready condition, or Ready=False with reason Provisioning, before a Warning event on the claim (SpaceRequestUnanswered, SpaceRequestNotReady) says so; "none" disables it.`)
}

// AddToManager registers the claim, target and orphan reconcilers with mgr.
func AddToManager(mgr ctrl.Manager, o Options) error {
	if mgr == nil {
		return errors.New("sandbox-provisioner: manager is nil")
	}
	if o.DefaultTierName == "" {
		o.DefaultTierName = claim.DefaultTierName
	}
	rec := status.BoundedRecorder(mgr.GetEventRecorder(Component))
	var errs []error
	if err := (&claim.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec,
		DefaultTierName: o.DefaultTierName, SpaceRequestWarning: o.SpaceRequestWarning}).SetupWithManager(mgr); err != nil {
		errs = append(errs, err)
	}
	if err := (&target.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec}).SetupWithManager(mgr); err != nil {
		errs = append(errs, err)
	}
	if err := (&orphan.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec}).SetupWithManager(mgr); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandbox-provisioner: %w", err)
	}
	return nil
}
