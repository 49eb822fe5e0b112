// Command spacerequest-stub serves SpaceRequests: a namespace, a ServiceAccount with the edit role, a kubeconfig Secret, and a Ready condition.
//
// Its reconcilers arrive with the environment-provisioning issue; until then the binary
// starts a manager, serves /healthz, /readyz and /metrics, and registers no
// controller.
package main

import "github.com/terrace-dev/terrace/kit/app"

func main() {
	app.Main("spacerequest-stub", app.Setup{})
}
