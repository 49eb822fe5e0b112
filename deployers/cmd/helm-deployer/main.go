// Command helm-deployer deploys DeployItems of type
// landscaper.gardener.cloud/helm as Helm releases on the cluster of their
// Target (see package deployers/internal/helm).
package main

import (
	"context"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/deployers/internal/cmdutil"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

// version is status.deployer.version; set at build time with
// -ldflags "-X main.version=<version>".
var version = "dev"

const name = "helm-deployer"

func main() {
	var (
		f    cmdutil.Flags
		opts helm.Options
	)
	app.Main(name, app.Setup{
		BindFlags: func(fs *pflag.FlagSet) {
			f.Bind(fs)
			opts.BindFlags(fs)
		},
		Register: func(_ context.Context, mgr ctrl.Manager, mo manager.Options) error {
			id, sel, err := f.Resolve(name)
			if err != nil {
				return err
			}
			opts.Name, opts.Identity, opts.Version, opts.TargetSelector = name, id, version, sel
			opts.DefaultTimeout, opts.CallTimeout = f.DefaultTimeout, f.CallTimeout
			// A Target naming the deployer's own endpoints is refused.
			opts.TargetClients.OwnListenAddresses = []string{mo.MetricsBindAddress, mo.HealthProbeBindAddress, mo.PprofBindAddress}
			return helm.AddToManager(mgr, opts)
		},
	})
}
