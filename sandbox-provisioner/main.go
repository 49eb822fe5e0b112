// Command sandbox-provisioner provisions DeploymentTargets for claims of the appstudio.redhat.com/devsandbox provisioner through SpaceRequests.
//
// Its reconcilers arrive with the environment-provisioning issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("sandbox-provisioner", app.Setup{})
}
