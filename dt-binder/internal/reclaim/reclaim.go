// Package reclaim applies a DeploymentTargetClass's reclaimPolicy to a target
// whose claim is gone. Both dt-binder reconcilers use it, so that a target is
// treated the same whichever of them finds its claim gone: the claim
// reconciler on a claim's deletion (its finalizer) and for a target bound to
// an earlier claim object of a claim's name, the target reconciler for a
// target whose recorded claim was deleted without its finalizer running.
//
// Every write is preconditioned (Release on the resourceVersion read, Delete
// on the UID), so two reconcilers applying the policy to one target at once
// cannot do it twice: the loser gets a Conflict (Release; retried, it finds
// the claimRef cleared) or a NotFound / a no-op delete (Delete), both harmless.
package reclaim

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// GetClass returns the named class, or nil when it does not exist.
func GetClass(ctx context.Context, c client.Reader, name string) (*appstudiov1alpha1.DeploymentTargetClass, error) {
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	err := c.Get(ctx, types.NamespacedName{Name: name}, class)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting class %s: %w", name, err)
	}
	return class, nil
}

// Policy is the reclaim policy a target of class gets: the class's, Delete
// when the class leaves it empty (the CRD's default), and Retain when the
// class does not exist (nil): deleting what no policy asked to delete is the
// one mistake that cannot be undone. Callers say so in a warning Event.
func Policy(class *appstudiov1alpha1.DeploymentTargetClass) appstudiov1alpha1.ReclaimPolicy {
	switch {
	case class == nil:
		return appstudiov1alpha1.ReclaimPolicyRetain
	case class.Spec.ReclaimPolicy != "":
		return class.Spec.ReclaimPolicy
	}
	return appstudiov1alpha1.ReclaimPolicyDelete
}

// LateTarget reports whether t was made by the sandbox provisioner from a
// SpaceRequest that is being deleted or is gone, and never bound. Such a
// target is what a provisioner whose cache still showed its claim created
// after the provisioner's orphan cleanup had deleted the SpaceRequest of a
// claim that went: the namespace its credentials name is going away.
// Releasing it (reclaimPolicy Retain) would offer it, Available, to the next
// claim of its class; so the Retain paths leave it to the provisioner, which
// deletes such a target whatever the policy. c must read from the API
// server, not a cache: a cache that has not seen the SpaceRequest's deletion
// yet would have the target released, Available, and another claim could
// bind it before the provisioner deletes it. Both reconcilers pass their
// APIReader. Rare: callers ask only on the path of a claim that is gone.
func LateTarget(ctx context.Context, c client.Reader, t *appstudiov1alpha1.DeploymentTarget) (bool, error) {
	srName := t.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]
	if srName == "" || t.Annotations[appstudiov1alpha1.ProvisionedByAnnotation] != appstudiov1alpha1.SandboxProvisioner ||
		t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound || t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseReleased {
		return false, nil
	}
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := c.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: srName}, sr)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading SpaceRequest %s of target %s: %w", srName, t.Name, err)
	}
	return sr.DeletionTimestamp != nil, nil
}

// Release clears t's claimRef (and the record of the claim it was written
// for), preconditioned on the version read, and returns the target as
// written (nil when nothing was written: t has no claimRef, is being deleted,
// or is gone). A target already being deleted keeps its claimRef: the
// provisioner finds the target's SpaceRequest through it. kind names the
// reconciler in the span ("<kind>.ReleaseTarget").
func Release(ctx context.Context, c client.Client, kind string, t *appstudiov1alpha1.DeploymentTarget) (*appstudiov1alpha1.DeploymentTarget, error) {
	if t.Spec.ClaimRef == nil || t.DeletionTimestamp != nil {
		return nil, nil
	}
	patched := t.DeepCopy()
	patched.Spec.ClaimRef = nil
	delete(patched.Annotations, appstudiov1alpha1.ClaimAnnotation)
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), kind, "ReleaseTarget", attribute.String("terrace.target", t.Name))
	err := c.Patch(spanCtx, patched, client.MergeFromWithOptions(t, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		tracing.EndStep(span, nil)
		return nil, nil
	}
	tracing.EndStep(span, err)
	if err != nil {
		return nil, fmt.Errorf("releasing target %s: %w", t.Name, err)
	}
	return patched, nil
}

// Delete deletes t, preconditioned on its UID (a target created again under
// the name is another object). A target already gone is not an error. kind
// names the reconciler in the span ("<kind>.DeleteTarget").
func Delete(ctx context.Context, c client.Client, kind string, t *appstudiov1alpha1.DeploymentTarget) error {
	uid := t.UID
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), kind, "DeleteTarget", attribute.String("terrace.target", t.Name))
	err := c.Delete(spanCtx, t, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("deleting target %s: %w", t.Name, err)
	}
	return nil
}
