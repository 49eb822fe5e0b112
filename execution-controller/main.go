// Command execution-controller reconciles Executions into ordered DeployItems
// and enforces the deploy-item pickup, progressing and abort timeouts on every
// DeployItem. See README.md for flags and behaviour.
package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/execution-controller/internal/controller"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

func main() {
	opts := controller.DefaultOptions()
	app.Main("execution-controller", app.Setup{
		BindFlags: opts.BindFlags,
		Register: func(ctx context.Context, mgr ctrl.Manager, _ manager.Options) error {
			return controller.AddToManager(ctx, mgr, opts)
		},
	})
}
