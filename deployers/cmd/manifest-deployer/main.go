// Command manifest-deployer applies DeployItems of type landscaper.gardener.cloud/kubernetes-manifest to their Target.
//
// Its reconcilers arrive with the deployers issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("manifest-deployer", app.Setup{})
}
