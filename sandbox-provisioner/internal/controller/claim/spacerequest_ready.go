package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// waitForSpaceRequest stops until the SpaceRequest is Ready, telling the
// claim when it is not for a reason other than provisioning in progress, or
// takes too long (warnSpaceRequest).
func (r *Reconciler) waitForSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	if ok, why := sandbox.SpaceRequestReady(s.sr); !ok {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for the SpaceRequest to be Ready", "status", why)
		return r.warnSpaceRequest(ctx, s)
	}
	// Ready: a later problem of this SpaceRequest (or of the next one) is new.
	r.warnings.clear(client.ObjectKeyFromObject(s.claim), topicSpaceRequest)
	return flow.Continue(), nil
}
