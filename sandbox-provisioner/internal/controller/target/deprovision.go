package target

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// deleteSpaceRequest deletes the target's SpaceRequest, or waits for it to go.
func (r *Reconciler) deleteSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := spaceRequestName(s.dt)
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.dt.Namespace, Name: name}, sr)
	if apierrors.IsNotFound(err) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	if !deletable(s.dt, sr) {
		log.Info("not deleting a SpaceRequest the provisioner did not make: the target is not annotated provisioned-by and the SpaceRequest carries no claim label",
			"provisionedBy", s.dt.Annotations[appstudiov1alpha1.ProvisionedByAnnotation])
		return flow.Continue(), nil
	}
	if sr.DeletionTimestamp.IsZero() {
		spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindTarget, "DeleteSpaceRequest", sandbox.AttrSpaceRequest.String(name))
		err := client.IgnoreNotFound(r.Client.Delete(spanCtx, sr, client.Preconditions{UID: &sr.UID}))
		tracing.EndStep(span, err)
		if err != nil {
			return flow.Continue(), fmt.Errorf("deleting SpaceRequest %s: %w", name, err)
		}
		log.Info("deleting SpaceRequest of deleted target")
		r.Recorder.Eventf(s.dt, sr, corev1.EventTypeNormal, EventDeletingSpaceRequest, "Deprovision",
			"Deleting SpaceRequest %s; the target is released once it is gone", name)
	} else {
		r.reportUnableToTerminate(ctx, s.dt, sr)
	}
	// Its deletion event brings the target back.
	return flow.Stop(), nil
}

// reportUnableToTerminate records the Warning Event
// SpaceRequestUnableToTerminate once per episode: from the SpaceRequest's
// turn to Ready reason UnableToTerminate until it leaves that reason (or the
// SpaceRequest is replaced). The target is reconciled again on every write to
// it and to its SpaceRequest while it waits (the binder writes its
// Terminating condition when UnableToTerminate begins, and its Failed phase
// when the binder's timeout expires), and an Event per reconcile told the
// same thing several times. The episode is remembered in memory: a restarted
// provisioner reports one still going once more.
func (r *Reconciler) reportUnableToTerminate(ctx context.Context, dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) {
	key := client.ObjectKeyFromObject(dt)
	c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	if c == nil || c.Reason != toolchainv1alpha1.ReasonUnableToTerminate {
		// Not (or no longer) unable: a later UnableToTerminate is a new episode.
		r.unableReported.forget(key)
		return
	}
	episode := unableEpisode(sr, c)
	if prev, ok := r.unableReported.get(key); ok && prev == episode {
		return
	}
	r.unableReported.set(key, episode)
	ctrl.LoggerFrom(ctx).Info("SpaceRequest is unable to terminate; still waiting", "message", c.Message,
		"since", c.LastTransitionTime.Time)
	r.Recorder.Eventf(dt, sr, corev1.EventTypeWarning, EventSpaceRequestNotTerminate, "Deprovision",
		"SpaceRequest %s is unable to terminate (%s); the target keeps its finalizer until it is gone", sr.Name, c.Message)
}

// unableEpisode names one UnableToTerminate episode of sr: its UID and the
// condition's lastTransitionTime, which the SpaceRequest controller sets when
// UnableToTerminate begins (a SpaceRequest that recovered and failed again
// between two reconciles is a new episode too).
func unableEpisode(sr *toolchainv1alpha1.SpaceRequest, c *metav1.Condition) string {
	return string(sr.UID) + "/" + c.LastTransitionTime.UTC().Format(time.RFC3339)
}

// confirmSpaceRequestGone asks the API server itself: the cache may lag
// behind a SpaceRequest created moments ago.
func (r *Reconciler) confirmSpaceRequestGone(ctx context.Context, s *scope) (flow.Result, error) {
	name := spaceRequestName(s.dt)
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.dt.Namespace, Name: name}, sr)
	if apierrors.IsNotFound(err) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	if !deletable(s.dt, sr) {
		return flow.Continue(), nil // not the provisioner's: not waited for
	}
	// Still there: the cache will catch up and bring the target back.
	return flow.Stop(), nil
}

// deletable: sr is the SpaceRequest the provisioner made for dt. A target
// annotated provisioned-by names its own (its annotation, else its name). A target that only carries the finalizer (its annotations
// were edited away) is released in any case, but the SpaceRequest of its
// name is deleted only if the provisioner made one (labelled with a claim):
// anything else is not the provisioner's to delete.
func deletable(dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) bool {
	return sandbox.ProvisionedBySandbox(dt) || sr.Labels[appstudiov1alpha1.ClaimLabel] != ""
}
