package spacerequest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/text"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// writeStatus writes the status computed by this reconcile, if it changed,
// and reports whether it is stored. Only the stub writes SpaceRequest
// status. The write that turns the SpaceRequest Ready is guarded (see
// markProvisioned). A SpaceRequest found gone is not an error: it is gone.
// The write is the child span "SpaceRequest.UpdateStatus".
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) (bool, error) {
	if s.patcher.Failed() {
		return false, nil
	}
	changed, err := s.patcher.Changed(s.sr)
	if err != nil || !changed {
		return err == nil, err
	}
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, "UpdateStatus", tracing.AttrPhase.String(readyReason(s.sr)))
	err = s.patcher.Patch(ctx, s.sr)
	if apierrors.IsNotFound(err) {
		tracing.EndStep(span, nil)
		s.gone = true
		return false, nil
	}
	tracing.EndStep(span, err)
	return err == nil, err
}

func isReady(status *toolchainv1alpha1.SpaceRequestStatus) bool {
	return meta.IsStatusConditionTrue(status.Conditions, toolchainv1alpha1.ConditionReady)
}

func readyReasonOf(status *toolchainv1alpha1.SpaceRequestStatus) string {
	if c := meta.FindStatusCondition(status.Conditions, toolchainv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// setReady sets the Ready condition and the observed generation. Entering
// UnableToTerminate sets lastTransitionTime to now although the status stays
// False (meta.SetStatusCondition moves it only when the status changes): it
// is the contract (README) that it says when UnableToTerminate began, and the
// dt-binder shows it in the target's Terminating message. The binder's
// deadline for a SpaceRequest that cannot terminate does not count from it
// but from the SpaceRequest's deletionTimestamp (seed 004, step 5).
func (r *Reconciler) setReady(sr *toolchainv1alpha1.SpaceRequest, status metav1.ConditionStatus, reason, message string) {
	sr.Status.ObservedGeneration = sr.Generation
	enters := reason == toolchainv1alpha1.ReasonUnableToTerminate && readyReason(sr) != reason
	meta.SetStatusCondition(&sr.Status.Conditions, metav1.Condition{
		Type:               toolchainv1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            boundedMessage(message),
		ObservedGeneration: sr.Generation,
	})
	if enters {
		meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady).LastTransitionTime = metav1.NewTime(r.clock())
	}
}

func readyReason(sr *toolchainv1alpha1.SpaceRequest) string {
	return readyReasonOf(&sr.Status)
}

func (r *Reconciler) markProvisioningStarted(_ context.Context, s *scope) (flow.Result, error) {
	if meta.FindStatusCondition(s.sr.Status.Conditions, toolchainv1alpha1.ConditionReady) == nil {
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning,
			fmt.Sprintf("Creating namespace %s and its credentials", NamespaceName(s.sr)))
	}
	return flow.Continue(), nil
}

// conditionMessageIs reports whether the Ready condition's message is msg
// (as setReady stores it).
func conditionMessageIs(sr *toolchainv1alpha1.SpaceRequest, msg string) bool {
	c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	return c != nil && c.Message == boundedMessage(msg)
}

// boundedMessage cuts a condition message to status.MaxMessage (the CRD's
// bound: a longer one would make the status write fail), keeping its end,
// which says what to do.
func boundedMessage(msg string) string {
	return text.CutMiddle(msg, status.MaxMessage, maxMessageTail)
}

// maxMessageTail is how much of a cut message's end is kept.
const maxMessageTail = 512

func (r *Reconciler) markProvisioned(ctx context.Context, s *scope) (flow.Result, error) {
	ns := NamespaceName(s.sr)
	s.sr.Status.TargetClusterURL = r.TargetClusterURL
	s.sr.Status.NamespaceAccess = []toolchainv1alpha1.NamespaceAccess{{Name: ns, SecretRef: SecretName(s.sr)}}
	wasReady := isReady(&s.sr.Status)
	if !wasReady {
		// The write that turns the SpaceRequest Ready is preconditioned on
		// its resourceVersion: from a stale cache (the stub's own Ready
		// write not seen yet) it fails with a conflict instead of writing
		// Ready again, so the provisioning duration is observed exactly
		// once: for the first time Ready (a SpaceRequest that was Ready
		// before keeps its namespaceAccess while it recovers).
		s.patcher.Guard()
		if !s.wasProvisioned {
			created := s.sr.CreationTimestamp.Time
			s.patcher.OnStored(func() { observeProvisioned(created) })
		}
	}
	r.setReady(s.sr, metav1.ConditionTrue, toolchainv1alpha1.ReasonProvisioned,
		fmt.Sprintf("Namespace %s is ready; Secret %s holds a kubeconfig with edit rights in it", ns, SecretName(s.sr)))
	if !wasReady {
		ctrl.LoggerFrom(ctx).Info("provisioned", "namespace", ns, "secret", SecretName(s.sr))
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventProvisioned, "Provision",
			"Namespace %s is ready; Secret %s holds its kubeconfig", ns, SecretName(s.sr))
	}
	return flow.Continue(), nil
}
