package lib

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/terrace-dev/terrace/kit/flow"
)

// ensureFinalizer writes the finalizer (with the pickup: reconcile-time
// removed) before the deployer touches anything the item describes, so a
// deletion from now on always runs the uninstall. Same number of writes: the
// metadata patch only moves ahead of the status write.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	if !s.addFinalizer || s.item.DeletionTimestamp != nil {
		return flow.Continue(), nil
	}
	err := r.persistMetadata(ctx, s)
	if err == nil {
		return flow.Continue(), nil
	}
	// Nothing more is written by this reconcile, nor reported.
	s.patcher.Skip()
	s.discard = true
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		s.log.V(1).Info("deploy item changed before the job started; retrying", "error", err.Error())
		s.only(reconcile.Result{RequeueAfter: minBackoff})
		return flow.Stop(), nil
	}
	return flow.Stop(), err
}
