package spacerequest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// checkClusterRole makes sure the edit ClusterRole grants something before
// handing out credentials bound to it. Its rules are aggregated by
// kube-controller-manager; on an API server without it (a bare envtest) the
// role exists but is empty, and a kubeconfig bound to it could do nothing.
func (r *Reconciler) checkClusterRole(ctx context.Context, s *scope) (flow.Result, error) {
	role := &rbacv1.ClusterRole{}
	err := r.RoleReader.Get(ctx, client.ObjectKey{Name: EditClusterRole}, role)
	var msg string
	switch {
	case apierrors.IsNotFound(err):
		msg = fmt.Sprintf("ClusterRole %s does not exist", EditClusterRole)
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading ClusterRole %s: %w", EditClusterRole, err)
	case len(role.Rules) == 0:
		msg = fmt.Sprintf("ClusterRole %s grants no permissions yet (kube-controller-manager aggregates its rules); waiting", EditClusterRole)
	default:
		return flow.Continue(), nil
	}
	if !conditionMessageIs(s.sr, msg) {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventClusterRoleNotReady, "Provision", "%s", msg)
	}
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
	return flow.Stop().RequeueAfter(clusterRoleRetry), nil
}
