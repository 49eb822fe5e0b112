// Package claim provisions for DeploymentTargetClaims the binder marked for
// appstudio.redhat.com/devsandbox: first one SpaceRequest, then, once the
// SpaceRequest is Ready, the DeploymentTarget pointing at what it provisioned.
// The binder then binds the two; this reconciler never writes claim or target
// status.
//
// The reconcile is the list of steps in claim_controller.go, one file per
// seed rule: wanted.go (is the claim still waiting), class.go (its class and
// parameters), spacerequest_create.go (the one SpaceRequest),
// spacerequest_ready.go and claim_warnings.go (waiting for it to be Ready,
// telling the claim when it is not), credentials_secret.go (its Secret holds
// a kubeconfig), target_create.go (the DeploymentTarget).
//
// Invariants:
//   - At most one SpaceRequest and one DeploymentTarget per claim UID, named
//     sandbox.ObjectName(claim); creates are server-side applies, so a second
//     create from another worker or a stale cache is a no-op.
//   - An existing target is never written: after creation the binder owns its
//     claimRef and status.
//   - No target is created before its SpaceRequest is Ready and its
//     credentials Secret holds a kubeconfig.
//   - Each distinct warning is recorded once per claim while it waits.
package claim
