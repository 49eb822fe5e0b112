package target

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// reconcileTermination follows a target being deleted (seed 004, step 5).
// The provisioner deletes the SpaceRequest and removes the target's finalizer
// once it is gone; the binder only reports: when the SpaceRequest has
// reported UnableToTerminate for longer than the timeout, the target turns
// Failed (its cluster resources were not cleaned up). Failed does not end the
// wait: when the SpaceRequest finally goes, the provisioner completes the
// deletion. The phase is otherwise left alone, so that a claim still sees
// which target it was bound to.
func (r *Reconciler) reconcileTermination(ctx context.Context, s *scope) (flow.Result, error) {
	srs, err := r.spaceRequests(ctx, s.target)
	if err != nil {
		return flow.Continue(), err
	}
	t := s.target
	if srs == nil {
		return flow.Continue(), nil // nothing names a SpaceRequest the binder could follow
	}
	if len(srs.Items) == 0 {
		s.setTerminating(appstudiov1alpha1.TerminatingReasonSpaceRequestGone,
			fmt.Sprintf("no SpaceRequest is left; waiting for finalizers %v", t.Finalizers))
		return flow.Continue(), nil
	}
	for i := range srs.Items {
		sr := &srs.Items[i]
		ready := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
		if ready != nil && ready.Reason == toolchainv1alpha1.ReasonUnableToTerminate {
			return r.unableToTerminate(s, sr, ready), nil
		}
	}
	s.setTerminating(appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest,
		fmt.Sprintf("waiting for SpaceRequest %s to be deleted", srs.Items[0].Name))
	return flow.Continue(), nil
}

// unableToTerminate reports sr, which reports UnableToTerminate (its Ready
// condition ready): the target turns Failed once the timeout has passed,
// and is reconciled again when it passes.
//
// Seed 004, step 5: Failed "if the SpaceRequest still exists after 2
// minutes, and has" Ready reason UnableToTerminate. The 2 minutes run from
// its deletion (step 3), not from when it began to report UnableToTerminate:
// the SpaceRequest controller reports that only after 2 minutes of failing
// to delete the Space, so counting from the report would make the target
// Failed after 4.
func (r *Reconciler) unableToTerminate(s *scope, sr *toolchainv1alpha1.SpaceRequest, ready *metav1.Condition) flow.Result {
	t := s.target
	now := r.Now()
	since := deletionStart(t, sr)
	deadline := since.Add(r.UnableToTerminateTimeout)
	if now.Before(deadline) {
		// Come back when the timeout expires; an event from the
		// SpaceRequest (gone, recovered) may come first.
		s.setTerminating(appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest,
			fmt.Sprintf("SpaceRequest %s reports UnableToTerminate (%s) since %s; the target turns Failed if it still exists at %s (%s after its deletion)",
				sr.Name, ready.Message, ready.LastTransitionTime.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339), r.UnableToTerminateTimeout))
		return flow.Continue().RequeueAfter(deadline.Sub(now) + 100*time.Millisecond)
	}
	if t.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseFailed {
		s.log.Info("SpaceRequest unable to terminate; target failed", "spaceRequest", sr.Name,
			"deletedAt", since, "unableToTerminateSince", ready.LastTransitionTime.Time)
	}
	t.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseFailed
	s.setTerminating(appstudiov1alpha1.TerminatingReasonUnableToTerminate,
		fmt.Sprintf("SpaceRequest %s still exists more than %s after its deletion and reports UnableToTerminate (%s): the cluster resources were not cleaned up; deletion completes when it is gone",
			sr.Name, r.UnableToTerminateTimeout, ready.Message))
	return flow.Continue()
}

// deletionStart is when the deletion of sr, the SpaceRequest of the target t
// being deleted, began: its deletionTimestamp, else (not deleted yet: the
// provisioner deletes it right after the target's deletion began) the
// target's.
func deletionStart(t *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) time.Time {
	if sr.DeletionTimestamp != nil {
		return sr.DeletionTimestamp.Time
	}
	return t.DeletionTimestamp.Time
}

// spaceRequests returns the SpaceRequests backing a target: the one its
// provisioner named in the spacerequest annotation (which survives a cleared
// claimRef), else those labelled with its claim. nil means the target names
// neither.
func (r *Reconciler) spaceRequests(ctx context.Context, t *appstudiov1alpha1.DeploymentTarget) (*toolchainv1alpha1.SpaceRequestList, error) {
	if name := t.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]; name != "" {
		sr := &toolchainv1alpha1.SpaceRequest{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, sr)
		switch {
		case apierrors.IsNotFound(err):
			return &toolchainv1alpha1.SpaceRequestList{}, nil
		case err != nil:
			return nil, fmt.Errorf("getting SpaceRequest %s: %w", name, err)
		}
		return &toolchainv1alpha1.SpaceRequestList{Items: []toolchainv1alpha1.SpaceRequest{*sr}}, nil
	}
	if t.Spec.ClaimRef == nil || t.Spec.ClaimRef.Name == "" {
		return nil, nil
	}
	srs := &toolchainv1alpha1.SpaceRequestList{}
	if err := r.Client.List(ctx, srs, client.InNamespace(t.Namespace),
		client.MatchingLabels{appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(t.Spec.ClaimRef.Name)}); err != nil {
		return nil, fmt.Errorf("listing SpaceRequests of claim %s: %w", t.Spec.ClaimRef.Name, err)
	}
	// A shortened label value selects by a hash: keep the claim's own.
	srs.Items = slices.DeleteFunc(srs.Items, func(sr toolchainv1alpha1.SpaceRequest) bool {
		return appstudiov1alpha1.ClaimOf(&sr) != t.Spec.ClaimRef.Name
	})
	return srs, nil
}
