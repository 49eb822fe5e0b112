package target

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// writeStatus writes the status if it changed (a merge patch of the changed
// fields, guarded by the resourceVersion) and emits the Events of its
// transitions. After a failed write of this reconcile it writes nothing.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	summarize(s.target)
	if s.patcher.Failed() {
		return nil
	}
	changed, err := s.patcher.Changed(s.target)
	if err != nil || !changed {
		return err
	}
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindTarget, "PatchStatus",
		tracing.AttrPhase.String(string(s.target.Status.Phase)))
	err = s.patcher.Patch(spanCtx, s.target)
	if apierrors.IsNotFound(err) {
		tracing.EndStep(span, nil)
		s.gone = true
		return nil
	}
	tracing.EndStep(span, err)
	if err != nil {
		return err
	}
	r.emitTransition(s)
	s.before = s.target.DeepCopy()
	return nil
}

// summarize sets the target's Ready condition (TargetConditionReady) from
// its phase and the condition that explains the phase now, so that kubectl
// get dt (whose Reason and Message columns read Ready) says what the phase
// means: a target being deleted, or Failed because its SpaceRequest could not
// terminate, shows the Terminating reason (UnableToTerminate, …), not the
// Bound condition's "bound to claim …". Bound and Terminating keep describing
// their own matter; Ready is derived from them in the status write they are
// part of, so it costs no request of its own. A target with neither (never
// reconciled) gets no Ready.
func summarize(t *appstudiov1alpha1.DeploymentTarget) {
	st := metav1.ConditionFalse
	var reason, message string
	bound := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.ConditionBound)
	terminating := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.ConditionTerminating)
	switch {
	case t.DeletionTimestamp != nil && terminating != nil:
		reason, message = terminating.Reason, terminating.Message
	case t.DeletionTimestamp != nil:
		reason = appstudiov1alpha1.TargetReasonDeleting
		message = fmt.Sprintf("being deleted; waiting for finalizers %v", t.Finalizers)
	case bound != nil:
		reason, message = bound.Reason, bound.Message
		if t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseAvailable || t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound {
			st = metav1.ConditionTrue
		}
	default:
		return
	}
	status.SetCondition(&t.Status.Conditions, t.Generation, appstudiov1alpha1.TargetConditionReady, st, reason, message)
}

// set sets the phase and the Bound condition that explains it.
func (s *scope) set(phase appstudiov1alpha1.DeploymentTargetPhase, st metav1.ConditionStatus, reason, message string) {
	s.target.Status.Phase = phase
	s.target.Status.ObservedGeneration = s.target.Generation
	status.SetCondition(&s.target.Status.Conditions, s.target.Generation, appstudiov1alpha1.ConditionBound, st, reason, message)
}

// setTerminating sets the Terminating condition of a target being deleted.
func (s *scope) setTerminating(reason, message string) {
	s.target.Status.ObservedGeneration = s.target.Generation
	status.SetCondition(&s.target.Status.Conditions, s.target.Generation, appstudiov1alpha1.ConditionTerminating, metav1.ConditionTrue, reason, message)
}
