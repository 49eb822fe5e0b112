package claim

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// claimTarget writes the claim into the target's spec.claimRef, preconditioned
// on the resourceVersion the decision was made on.
// A target another reconcile of this binder is claiming right now counts as
// a conflict (see expectations).
func (r *Reconciler) claimTarget(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) error {
	return r.writeClaimRef(ctx, s, t, tracing.Inject)
}

// writeClaimRef is claimTarget's write; inject puts the trace context of
// the ClaimTarget span into the target's annotations (tracing.Inject, or
// tracing.InjectOnce to keep a context the target has: recordClaim's, on a
// target whose creator handed a trace over already).
func (r *Reconciler) writeClaimRef(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget,
	inject func(context.Context, map[string]string) map[string]string) (err error) {
	// A claim is never deleted without its target being dealt with: its
	// finalizer is on the API server before any target names it.
	if err := r.persistFinalizer(ctx, s); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(t)
	if !r.exp.reserve(key, t.ResourceVersion) {
		return apierrors.NewConflict(appstudiov1alpha1.SchemeGroupVersion.WithResource("deploymenttargets").GroupResource(),
			t.Name, errors.New("being claimed by another claim"))
	}
	ctx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "ClaimTarget", attribute.String("terrace.target", t.Name))
	defer func() { tracing.EndStep(span, err) }()
	patched := t.DeepCopy()
	patched.Spec.ClaimRef = &appstudiov1alpha1.DeploymentTargetClaimReference{Name: s.claim.Name}
	// The claim object, not only its name, in the same write: a claim
	// created later under this name does not inherit the target.
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[appstudiov1alpha1.ClaimAnnotation] = appstudiov1alpha1.ClaimRecord(s.claim)
	// The claim's job goes on with the target (whose reconcile reports it
	// Bound): hand the trace over in the same write (no-op with tracing off).
	patched.Annotations = inject(ctx, patched.Annotations)
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(t, client.MergeFromWithOptimisticLock{})); err != nil {
		r.claimRefFailed(s, t, err)
		return fmt.Errorf("claiming target %s: %w", t.Name, err)
	}
	r.exp.done(s.key, key, t.ResourceVersion)
	// No Event: the claim's Bound Event, once the target reports Bound, is
	// the one that says what happened (this write is logged, and traced).
	s.log.Info("claimed target", "target", t.Name)
	return nil
}

// claimRefFailed records the outcome of a failed claimRef write in the
// expectations.
func (r *Reconciler) claimRefFailed(s *scope, t *appstudiov1alpha1.DeploymentTarget, err error) {
	key := client.ObjectKeyFromObject(t)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Not applied: the target moved on, or is gone.
		r.exp.done(s.key, key, "")
		return
	}
	// A timeout or a lost response: the write may have been applied. Moving
	// on to another target from a cache that still shows this one free could
	// bind two; the next reconcile asks the API server first (loadTargets).
	r.exp.unknown(s.key, key, t.ResourceVersion)
	s.log.Info("outcome of a claimRef write unknown; the next reconcile confirms it with the API server", "target", t.Name, "error", err.Error())
}

// recordClaim gives a target that names the claim by name only, without the
// claim record (a target a user pre-bound to the claim, before or after the
// claim was created; or one an older provisioner made without the record),
// the record of this claim object, when the claim binds it: as the
// PersistentVolume controller sets a pre-bound volume's claimRef.uid when it
// binds it. From then on the target is this claim object's only, as any
// target the binder bound: a claim of the same name created after this one
// went by force does not inherit it (reclaimEarlier), and the reclaimPolicy
// of its class applies when this claim goes without its finalizer running
// (the target reconciler's reclaimGoneClaim). Without the record both would
// take the target for the new claim's, or leave it Released for ever.
//
// Only while the claim binds (no bind-complete yet): a bind-complete claim
// whose target lacks the record is left as it is. The write is claimTarget's
// (the claimRef already names the claim; the write adds the record and the
// trace context, preconditioned on the target's resourceVersion), so the
// claim then waits for the cache to show it, as after any claimRef write,
// and turns Bound on a later reconcile. It reports whether it wrote (or the
// target went meanwhile): the reconcile then has nothing more to decide.
// Rare: pre-bound targets only; a provisioned target carries the record from
// its create.
func (r *Reconciler) recordClaim(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) (bool, error) {
	if binding.BindComplete(s.claim) || binding.RecordedClaimUID(t) != "" || t.DeletionTimestamp != nil || released(t) ||
		t.Spec.DeploymentTargetClassName != s.claim.Spec.DeploymentTargetClassName {
		return false, nil
	}
	// A trace context the target has (its provisioner's) is kept.
	if err := r.writeClaimRef(ctx, s, t, tracing.InjectOnce); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // gone: its delete event brings the claim back
		}
		return true, err
	}
	s.log.Info("recorded the claim on the target pre-bound to it", "target", t.Name)
	if !provisioning(s.claim) {
		s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
			fmt.Sprintf("target %s names this claim; recorded this claim on it, waiting for it to report Bound", t.Name))
	}
	return true, nil
}
