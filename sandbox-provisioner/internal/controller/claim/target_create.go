package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// checkTarget stops once the claim's target exists: an existing target is
// left alone (after creation the binder owns its claimRef and status).
func (r *Reconciler) checkTarget(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	key := client.ObjectKey{Namespace: s.claim.Namespace, Name: name}
	err := r.Client.Get(ctx, key, &appstudiov1alpha1.DeploymentTarget{})
	switch {
	case err == nil:
		r.created.seen(sandbox.KindTarget, key)
		ctrl.LoggerFrom(ctx).V(1).Info("target exists; waiting for the binder")
		// Provisioned: nothing it was told about applies any more.
		r.warnings.forget(client.ObjectKeyFromObject(s.claim))
		return flow.Stop(), nil
	case apierrors.IsNotFound(err):
		res, _ := r.waitForCreated(ctx, sandbox.KindTarget, key)
		return res, nil
	default:
		return flow.Continue(), fmt.Errorf("reading DeploymentTarget %s: %w", name, err)
	}
}

// createTarget creates the target from the Ready SpaceRequest's status. The
// phases before it checked, in the cache, that the claim is not being deleted
// and the SpaceRequest not either; a cache that lags may still show both
// alive after the orphan reconciler deleted the SpaceRequest (confirmed with
// the API server). No read can close that window without a request per claim
// and even then not entirely (the claim can go between the read and the
// create), so the orphan reconciler deletes such a late target when its
// creation event arrives (see package orphan).
func (r *Reconciler) createTarget(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	access := s.sr.Status.NamespaceAccess[0]
	ctx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindClaim, "CreateDeploymentTarget",
		sandbox.AttrTarget.String(name), sandbox.AttrSpaceRequest.String(s.sr.Name))
	// The binder continues the claim's trace from the target: the trace
	// context goes into the create itself (nothing with tracing off).
	annotations := tracing.Inject(ctx, map[string]string{
		appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
		appstudiov1alpha1.SpaceRequestAnnotation:  s.sr.Name,
		// The claim object, not only its name (claimRef), in the same write.
		appstudiov1alpha1.ClaimAnnotation: appstudiov1alpha1.ClaimRecord(s.claim),
	})
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": appstudiov1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeploymentTarget",
		"metadata": map[string]any{
			"name":        name,
			"namespace":   s.claim.Namespace,
			"annotations": toAny(annotations),
			"finalizers":  []any{appstudiov1alpha1.TargetFinalizer},
		},
		"spec": map[string]any{
			"deploymentTargetClassName": s.claim.Spec.DeploymentTargetClassName,
			"claimRef":                  map[string]any{"name": s.claim.Name},
			"kubernetesCredentials": map[string]any{
				"defaultNamespace":         access.Name,
				"apiURL":                   s.sr.Status.TargetClusterURL,
				"clusterCredentialsSecret": access.SecretRef,
			},
		},
	}}
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(sandbox.FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("applying DeploymentTarget %s: %w", name, err)
	}
	r.created.add(sandbox.KindTarget, client.ObjectKey{Namespace: s.claim.Namespace, Name: name})
	ctrl.LoggerFrom(ctx).Info("created DeploymentTarget", "target", name, "namespace", access.Name)
	return flow.Continue(), nil
}
