// Command manifest-deployer applies DeployItems of type
// landscaper.gardener.cloud/kubernetes-manifest to the cluster of their Target
// (see package deployers/internal/manifest).
package main

import (
	"context"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/terrace-dev/terrace/deployers/internal/cmdutil"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
)

// version is status.deployer.version; set at build time with
// -ldflags "-X main.version=<version>".
var version = "dev"

const name = "manifest-deployer"

func main() {
	var f cmdutil.Flags
	app.Main(name, app.Setup{
		BindFlags: func(fs *pflag.FlagSet) { f.Bind(fs) },
		Register: func(_ context.Context, mgr ctrl.Manager, _ manager.Options) error {
			id, sel, err := f.Resolve(name)
			if err != nil {
				return err
			}
			return manifest.AddToManager(mgr, manifest.Options{Name: name, Identity: id, Version: version, TargetSelector: sel, DefaultTimeout: f.DefaultTimeout})
		},
	})
}
