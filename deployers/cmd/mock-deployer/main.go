// Command mock-deployer finishes DeployItems of type landscaper.gardener.cloud/mock
// in the phase their configuration names (see package deployers/internal/mock).
package main

import (
	"context"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/deployers/internal/cmdutil"
	"github.com/terrace-dev/terrace/deployers/internal/mock"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

// version is status.deployer.version; set at build time with
// -ldflags "-X main.version=<version>".
var version = "dev"

const name = "mock-deployer"

func main() {
	var f cmdutil.Flags
	app.Main(name, app.Setup{
		BindFlags: func(fs *pflag.FlagSet) { f.Bind(fs) },
		Register: func(_ context.Context, mgr ctrl.Manager, _ manager.Options) error {
			id, sel, err := f.Resolve(name)
			if err != nil {
				return err
			}
			return mock.AddToManager(mgr, mock.Options{Name: name, Identity: id, Version: version, TargetSelector: sel, DefaultTimeout: f.DefaultTimeout, CallTimeout: f.CallTimeout})
		},
	})
}
