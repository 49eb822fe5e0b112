// Command mock-deployer finishes DeployItems of type landscaper.gardener.cloud/mock in the phase their configuration names.
//
// Its reconcilers arrive with the deployers issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("mock-deployer", app.Setup{})
}
