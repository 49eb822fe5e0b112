// Command dt-binder binds DeploymentTargetClaims to DeploymentTargets and runs
// their deletion flows (seed 004). See README.md for what it does and its flags.
package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

func main() {
	var opts binder.Options
	app.Main("dt-binder", app.Setup{
		BindFlags: opts.BindFlags,
		Register: func(_ context.Context, mgr ctrl.Manager, _ manager.Options) error {
			return binder.AddToManager(mgr, opts)
		},
	})
}
