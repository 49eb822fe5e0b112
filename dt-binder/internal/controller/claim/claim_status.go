package claim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// write stores what the reconcile changed: metadata (annotations,
// finalizers; spec.targetName once bound), then status, each only if
// changed, each preconditioned on the resourceVersion, and emits an Event
// when the Bound condition changed its reason. When the claim turns Bound it
// observes the bind latency, once: the status write succeeds only from the
// state the reconcile read, which was not Bound.
func (r *Reconciler) write(ctx context.Context, s *scope) error {
	if err := r.writeMetadata(ctx, s); err != nil || s.gone {
		return err
	}
	return r.writeStatus(ctx, s)
}

// writeMetadata is the reconcile's one metadata patch. It also carries the
// claim's trace context if the claim has none yet (never a write of its own).
func (r *Reconciler) writeMetadata(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.before.Annotations, s.claim.Annotations) &&
		equality.Semantic.DeepEqual(s.before.Finalizers, s.claim.Finalizers) &&
		s.before.Spec.TargetName == s.claim.Spec.TargetName {
		return nil
	}
	desired := s.claim.Status.DeepCopy()
	obj := s.claim.DeepCopy()
	obj.Status = s.before.Status
	if obj.DeletionTimestamp == nil {
		obj.Annotations = tracing.InjectOnce(ctx, obj.Annotations)
	}
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "PatchMetadata")
	err := s.patcher.Track(obj, func() error {
		return r.Client.Patch(spanCtx, obj, client.MergeFromWithOptions(s.before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		tracing.EndStep(span, err)
		return fmt.Errorf("patching claim metadata: %w", err)
	}
	tracing.EndStep(span, nil)
	if apierrors.IsNotFound(err) || (obj.DeletionTimestamp != nil && !hasFinalizer(obj)) {
		s.gone = true // deleted by now: no status to write
		s.patcher.Skip()
		return nil
	}
	if p := obj.Annotations[appstudiov1alpha1.ProvisionerAnnotation]; p != "" && s.before.Annotations[appstudiov1alpha1.ProvisionerAnnotation] == "" {
		// No Event of its own: the claim's Bound event (and the trace)
		// tell the outcome.
		s.log.Info("requested dynamic provisioning", "provisioner", p)
	}
	s.claim = obj
	s.claim.Status = *desired
	observeOwnSpecChange(&s.claim.Status, s.before.Generation, obj.Generation)
	return nil
}

// writeStatus is the reconcile's one status write (a merge patch of the
// changed fields, guarded by the resourceVersion).
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	changed, err := s.patcher.Changed(s.claim)
	if err != nil || !changed {
		return err
	}
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "PatchStatus",
		tracing.AttrPhase.String(string(s.claim.Status.Phase)))
	err = s.patcher.Patch(spanCtx, s.claim)
	if apierrors.IsNotFound(err) {
		tracing.EndStep(span, nil)
		s.gone = true
		return nil
	}
	tracing.EndStep(span, err)
	if err != nil {
		return err
	}
	if s.before.Status.Phase != appstudiov1alpha1.DeploymentTargetClaimPhaseBound &&
		s.claim.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
		observability.ObserveBind(bindMode(s.claim), s.claim.CreationTimestamp.Time)
		// The claim's trace links to the trace of the target it is bound to.
		observability.LinkTo(ctx, s.link)
	}
	r.emitTransition(s)
	return nil
}

// observeOwnSpecChange moves the status computed for generation from to
// generation to, when the metadata patch that took the claim there was this
// reconcile's own (spec.targetName of a claim it bound; the patch is guarded
// by the resourceVersion read, so no other spec change came with it): the
// status describes exactly that spec.
func observeOwnSpecChange(st *appstudiov1alpha1.DeploymentTargetClaimStatus, from, to int64) {
	if from == to || st.ObservedGeneration != from {
		return
	}
	st.ObservedGeneration = to
	for i := range st.Conditions {
		if st.Conditions[i].ObservedGeneration == from {
			st.Conditions[i].ObservedGeneration = to
		}
	}
}

// bindMode is the mode label of the bind latency: dynamic for claims marked
// for dynamic provisioning, static otherwise.
func bindMode(c *appstudiov1alpha1.DeploymentTargetClaim) string {
	if c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] != "" {
		return observability.ModeDynamic
	}
	return observability.ModeStatic
}

// setCondition sets the Bound condition. Every write sets
// observedGeneration, so a reader knows the status answers the claim's
// current spec.
func (s *scope) setCondition(st metav1.ConditionStatus, reason, message string) {
	s.claim.Status.ObservedGeneration = s.claim.Generation
	status.SetCondition(&s.claim.Status.Conditions, s.claim.Generation, appstudiov1alpha1.ConditionBound, st, reason, message)
}

func (s *scope) pending(reason, message string) {
	s.claim.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhasePending
	s.setCondition(metav1.ConditionFalse, reason, message)
}

// bound makes the claim Bound to t, which reports Bound.
func (s *scope) bound(t *appstudiov1alpha1.DeploymentTarget) {
	c := s.claim
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] = appstudiov1alpha1.AnnotationTrue
	if c.Spec.TargetName == "" {
		// The binder, not the user, found the target (best match, a
		// provisioned target, or a target pre-bound by claimRef). Like a
		// PersistentVolumeClaim's volumeName, spec.targetName then names it
		// (kubectl get's TARGET column), written with the annotations.
		c.Annotations[appstudiov1alpha1.BoundByControllerAnnotation] = appstudiov1alpha1.AnnotationTrue
		c.Spec.TargetName = t.Name
	}
	c.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhaseBound
	switch {
	case t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName && c.Spec.TargetName != t.Name:
		// The class change decides, as alone (the claim keeps t), but the
		// targetName change must not go unnoticed: the reason and its
		// Warning Event name both.
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonClassAndTargetNameChanged, classAndTargetNameChangedMessage(c, t))
	case t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName:
		// Still bound (whoever uses the claim keeps its target), but the
		// spec does not describe the binding: a Warning condition reason
		// says so until the class is set back or the claim is replaced.
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonClassChanged, classChangedMessage(c, t))
	default:
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonBound, fmt.Sprintf("bound to target %s", t.Name))
	}
}

func classAndTargetNameChangedMessage(c *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) string {
	return fmt.Sprintf("bound to target %s of class %q; both spec.deploymentTargetClassName (now %q) and spec.targetName (now %s) were changed after binding: "+
		"a bound claim keeps its target, so neither change takes effect (target %s is not bound, nothing is provisioned for class %q), "+
		"and class %q's reclaimPolicy applies when the claim is deleted. Set both back, or create a new claim",
		t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName, c.Spec.TargetName,
		c.Spec.TargetName, c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName)
}

func classChangedMessage(c *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget) string {
	return fmt.Sprintf("bound to target %s of class %q; spec.deploymentTargetClassName was changed to %q after binding: a bound claim keeps its target, "+
		"and class %q's reclaimPolicy applies when the claim is deleted. Set the class back, or create a new claim for class %q",
		t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName)
}
