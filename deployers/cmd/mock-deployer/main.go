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
	var opts mock.Options
	app.Main(name, app.Setup{
		BindFlags: func(fs *pflag.FlagSet) { f.Bind(fs); opts.BindFlags(fs) },
		Register: func(_ context.Context, mgr ctrl.Manager, _ manager.Options) error {
			id, sel, err := f.Resolve(name)
			if err != nil {
				return err
			}
			opts.Name, opts.Identity, opts.Version, opts.TargetSelector = name, id, version, sel
			opts.DefaultTimeout, opts.CallTimeout = f.DefaultTimeout, f.CallTimeout
			return mock.AddToManager(mgr, opts)
		},
	})
}
