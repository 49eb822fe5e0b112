package claim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// checkCredentialsSecret makes sure the Secret the target will point to
// exists and holds a kubeconfig, so that no target is made with credentials
// that cannot work.
func (r *Reconciler) checkCredentialsSecret(ctx context.Context, s *scope) (flow.Result, error) {
	name := s.sr.Status.NamespaceAccess[0].SecretRef
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: name}, secret)
	if err == nil && len(secret.Data[toolchainv1alpha1.AdminKubeconfigKey]) > 0 {
		return flow.Continue(), nil
	}
	msg := fmt.Sprintf("SpaceRequest %s is Ready but its Secret %s holds no %q", s.sr.Name, name, toolchainv1alpha1.AdminKubeconfigKey)
	if err != nil && !apierrors.IsNotFound(err) {
		return flow.Continue(), fmt.Errorf("reading Secret %s: %w", name, err)
	}
	if apierrors.IsNotFound(err) {
		msg = fmt.Sprintf("SpaceRequest %s is Ready but its Secret %s does not exist", s.sr.Name, name)
	}
	r.Recorder.Eventf(s.claim, s.sr, corev1.EventTypeWarning, EventCredentialsSecretAbsent, "Provision", "%s", msg)
	s.reported = true
	// Retried with back-off: nothing this process watches announces it.
	return flow.Continue(), errors.New(msg)
}
