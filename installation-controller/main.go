// Command installation-controller reconciles Installations: jobs, blueprints, imports and exports, sub-installations.
//
// Its reconcilers arrive with the installation-controller issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("installation-controller", app.Setup{})
}
