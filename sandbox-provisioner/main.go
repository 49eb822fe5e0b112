// Command sandbox-provisioner provisions DeploymentTargets for claims the
// binder marked for appstudio.redhat.com/devsandbox, through SpaceRequests.
// See README.md.
package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/controller"
)

func main() {
	var opts controller.Options
	app.Main(controller.Component, app.Setup{
		BindFlags: opts.BindFlags,
		Register: func(_ context.Context, mgr ctrl.Manager, _ manager.Options) error {
			return controller.AddToManager(mgr, opts)
		},
	})
}
