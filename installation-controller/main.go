// Command installation-controller reconciles Installations: jobs, blueprints,
// imports and exports, sub-installations.
package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

func main() {
	var opts installation.Options
	app.Main("installation-controller", app.Setup{
		// The bounds of what one installation may make the controller
		// create, read and render (see README.md).
		BindFlags: opts.BindFlags,
		Register: func(ctx context.Context, mgr ctrl.Manager, _ manager.Options) error {
			// The manager already applies the shared controller defaults
			// (concurrency, panic recovery).
			return installation.AddToManager(ctx, mgr, opts)
		},
	})
}
