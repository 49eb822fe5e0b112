// Command dt-binder binds DeploymentTargetClaims to DeploymentTargets and runs their deletion flows.
//
// Its reconcilers arrive with the environment-provisioning issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("dt-binder", app.Setup{})
}
