package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// applySpaceRequest creates the claim's one SpaceRequest unless it exists.
func (r *Reconciler) applySpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	sr := &toolchainv1alpha1.SpaceRequest{}
	key := client.ObjectKey{Namespace: s.claim.Namespace, Name: name}
	err := r.Client.Get(ctx, key, sr)
	switch {
	case err == nil:
		r.created.seen(sandbox.KindSpaceRequest, key)
		s.sr = sr
		if !sr.DeletionTimestamp.IsZero() {
			// Its deletion event brings the claim back; then a new one is made.
			ctrl.LoggerFrom(ctx).Info("waiting for the previous SpaceRequest to go")
			return flow.Stop(), nil
		}
		return flow.Continue(), nil
	case !apierrors.IsNotFound(err):
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	if res, wait := r.waitForCreated(ctx, sandbox.KindSpaceRequest, key); wait {
		return res, nil
	}

	ctx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindClaim, "CreateSpaceRequest", sandbox.AttrSpaceRequest.String(name))
	u := spaceRequestObject(ctx, s, name)
	err = r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(sandbox.FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("applying SpaceRequest %s: %w", name, err)
	}
	r.created.add(sandbox.KindSpaceRequest, key)
	ctrl.LoggerFrom(ctx).Info("created SpaceRequest; waiting for it to be Ready", "tierName", s.params.TierName)
	// Its status change brings the claim back; should none come, the
	// warning delay does, to say that nothing answers it.
	if delay, on := r.spaceRequestWarning(); on {
		return flow.Stop().RequeueAfter(delay), nil
	}
	return flow.Stop(), nil
}

// spaceRequestObject is the claim's SpaceRequest as applied. The SpaceRequest
// controller continues the claim's trace from it: the trace context of ctx
// goes into the create itself (nothing with tracing off).
func spaceRequestObject(ctx context.Context, s *scope, name string) *unstructured.Unstructured {
	spec := map[string]any{"tierName": s.params.TierName}
	if len(s.params.TargetClusterRoles) > 0 {
		roles := make([]any, 0, len(s.params.TargetClusterRoles))
		for _, role := range s.params.TargetClusterRoles {
			roles = append(roles, role)
		}
		spec["targetClusterRoles"] = roles
	}
	annotations := tracing.Inject(ctx, map[string]string{
		appstudiov1alpha1.ClaimLabel:                s.claim.Name,
		appstudiov1alpha1.ClassLabel:                s.claim.Spec.DeploymentTargetClassName,
		toolchainv1alpha1.NamespaceLimitsAnnotation: s.limits.String(),
	})
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": toolchainv1alpha1.SchemeGroupVersion.String(),
		"kind":       "SpaceRequest",
		"metadata": map[string]any{
			"name":      name,
			"namespace": s.claim.Namespace,
			// Labels select (their values are at most 63 characters); the
			// annotations of the same keys hold the full names.
			"labels": map[string]any{
				appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(s.claim.Name),
				appstudiov1alpha1.ClassLabel: appstudiov1alpha1.LabelValue(s.claim.Spec.DeploymentTargetClassName),
			},
			"annotations": toAny(annotations),
		},
		"spec": spec,
	}}
}

// toAny converts annotations for an unstructured object.
func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
