// Command execution-controller reconciles Executions into ordered DeployItems and enforces the deploy-item pickup, progressing and abort timeouts.
//
// Its reconcilers arrive with the execution-controller issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("execution-controller", app.Setup{})
}
