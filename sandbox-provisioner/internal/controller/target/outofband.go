package target

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/stale"
)

// reportSpaceRequestDeletion records a Warning Event on a live target whose
// SpaceRequest was deleted by someone else: the namespace its credentials
// point to is going, and the target, possibly Bound, would otherwise say
// nothing. Only a deletion seen in a SpaceRequest event is looked at (the
// normal path costs nothing); the cache is read, and a SpaceRequest the
// cache does not show is confirmed gone with the API server. The target is
// kept: deleting it is its claim's (and its class's reclaimPolicy's) call.
func (r *Reconciler) reportSpaceRequestDeletion(ctx context.Context, s *scope) (flow.Result, error) {
	key := client.ObjectKeyFromObject(s.dt)
	uid, ok := r.deletions.take(key)
	if !ok {
		return flow.Continue(), nil
	}
	name := spaceRequestName(s.dt)
	srKey := client.ObjectKey{Namespace: s.dt.Namespace, Name: name}
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := stale.Get(ctx, r.Client, r.APIReader, srKey, sr)
	switch {
	case apierrors.IsNotFound(err):
		sr = nil
	case err != nil:
		r.deletions.set(key, uid) // looked at again on the retry
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	case sr.DeletionTimestamp.IsZero():
		return flow.Continue(), nil // alive: the deletion seen was of another object
	default:
		uid = sr.UID
	}
	if sr != nil && !deletable(s.dt, sr) {
		return flow.Continue(), nil
	}
	if prev, ok := r.reported.get(key); ok && prev == uid {
		return flow.Continue(), nil // this deletion was reported already (its delete event after its update)
	}
	r.reported.set(key, uid)
	state := "is being deleted"
	if sr == nil {
		state = "is gone"
	}
	ctrl.LoggerFrom(ctx).Info("the SpaceRequest of a live target was deleted out of band; keeping the target",
		"state", state, "phase", string(s.dt.Status.Phase), "namespace", s.dt.Spec.KubernetesClusterCredentials.DefaultNamespace)
	r.Recorder.Eventf(s.dt, nil, corev1.EventTypeWarning, EventSpaceRequestDeletedOutOfBand, "Provision",
		"SpaceRequest %s %s, deleted by someone other than the provisioner while this target lives (phase %q): namespace %s its credentials point to goes with it. "+
			"The target is kept; delete its claim (or the target) to let the class's reclaimPolicy clean up",
		name, state, s.dt.Status.Phase, s.dt.Spec.KubernetesClusterCredentials.DefaultNamespace)
	return flow.Continue(), nil
}
