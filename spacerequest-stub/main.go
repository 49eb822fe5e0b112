// Command spacerequest-stub serves SpaceRequests: a namespace, a ServiceAccount
// with the edit ClusterRole in that namespace, a kubeconfig Secret whose token
// comes from the TokenRequest API, and a Ready condition. See README.md.
package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller"
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
