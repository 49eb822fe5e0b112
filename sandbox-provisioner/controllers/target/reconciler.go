// Package target looks after the DeploymentTargets the sandbox-provisioner
// created: it keeps their finalizer while they live, and when one is deleted
// it deletes the target's SpaceRequest, waits until the SpaceRequest is gone
// (the SpaceRequest controller removes the namespace first), and only then
// releases the target by removing the finalizer. It never writes target
// status: the binder reports Failed when the SpaceRequest cannot terminate.
package target

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/controllers/sandbox"
)

// Event reasons (on the target).
const (
	EventDeletingSpaceRequest     = "DeletingSpaceRequest"
	EventSpaceRequestNotTerminate = "SpaceRequestUnableToTerminate"
	EventReleased                 = "Released"
	// EventDeprovisioningFailed: a reconcile of a target failed with an
	// error (deleting its SpaceRequest, a finalizer write); it is retried
	// with back-off.
	EventDeprovisioningFailed = "DeprovisioningFailed"
)

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler handles the finalizer of provisioned targets.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader confirms directly with the API server that a SpaceRequest is
	// gone before the finalizer is released.
	APIReader client.Reader
	// Recorder records events on targets.
	Recorder events.EventRecorder
}

// SetupWithManager checks the reconciler's settings and registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setup.Check("target", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("target").
		For(&appstudiov1alpha1.DeploymentTarget{},
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return sandbox.ProvisionedBySandbox(o) }))).
		// A SpaceRequest's deletion (or failure to terminate) brings its
		// target back. Target and SpaceRequest share their name.
		Watches(&toolchainv1alpha1.SpaceRequest{}, handler.EnqueueRequestsFromMapFunc(spaceRequestToTarget)).
		Complete(r)
}

func spaceRequestToTarget(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[appstudiov1alpha1.ClaimLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
}

// scope is the state of one reconcile.
type scope struct {
	dt   *appstudiov1alpha1.DeploymentTarget
	stop bool
}

type phase func(ctx context.Context, s *scope) error

// Stopped reports whether a phase ended the reconcile early.
func (s *scope) Stopped() bool { return s.stop }

// Reconcile keeps or releases a provisioned target's finalizer. The
// reconcile is the span "DeploymentTarget.Reconcile", continuing the trace
// handed over in the target's trace-context annotation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, req.NamespacedName, dt); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sandbox.ProvisionedBySandbox(dt) {
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindTarget, dt, "")
	defer func() { tracing.EndReconcile(span, string(dt.Status.Phase), retErr) }()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("spaceRequest", spaceRequestName(dt)))
	s := &scope{dt: dt}
	var err error
	if dt.DeletionTimestamp.IsZero() {
		err = sandbox.RunPhases(ctx, s, []phase{r.ensureFinalizer})
	} else {
		err = sandbox.RunPhases(ctx, s, []phase{
			r.checkFinalizerPresent,
			r.deleteSpaceRequest,
			r.confirmSpaceRequestGone,
			r.removeFinalizer,
		})
	}
	if err != nil && !apierrors.IsConflict(err) {
		r.Recorder.Eventf(dt, nil, corev1.EventTypeWarning, EventDeprovisioningFailed, "Deprovision", "%v", err)
	}
	return ctrl.Result{}, err
}

// spaceRequestName is the SpaceRequest backing dt: its annotation, else (for
// targets from before the annotation) the target's own name.
func spaceRequestName(dt *appstudiov1alpha1.DeploymentTarget) string {
	if n := dt.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]; n != "" {
		return n
	}
	return dt.Name
}

// patchFinalizers writes a finalizer change, failing on a concurrent change
// so that no other writer's finalizer is lost.
func (r *Reconciler) patchFinalizers(ctx context.Context, dt *appstudiov1alpha1.DeploymentTarget, mutate func(client.Object) bool) error {
	base := dt.DeepCopy()
	if !mutate(dt) {
		return nil
	}
	return r.Client.Patch(ctx, dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) error {
	if err := r.patchFinalizers(ctx, s.dt, func(o client.Object) bool {
		return controllerutil.AddFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

func (r *Reconciler) checkFinalizerPresent(_ context.Context, s *scope) error {
	s.stop = !controllerutil.ContainsFinalizer(s.dt, appstudiov1alpha1.TargetFinalizer)
	return nil
}

// deleteSpaceRequest deletes the target's SpaceRequest, or waits for it to go.
func (r *Reconciler) deleteSpaceRequest(ctx context.Context, s *scope) error {
	log := ctrl.LoggerFrom(ctx)
	name := spaceRequestName(s.dt)
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.dt.Namespace, Name: name}, sr)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	if sr.DeletionTimestamp.IsZero() {
		spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindTarget, "DeleteSpaceRequest", sandbox.AttrSpaceRequest.String(name))
		err := client.IgnoreNotFound(r.Client.Delete(spanCtx, sr, client.Preconditions{UID: &sr.UID}))
		tracing.EndStep(span, err)
		if err != nil {
			return fmt.Errorf("deleting SpaceRequest %s: %w", name, err)
		}
		log.Info("deleting SpaceRequest of deleted target")
		r.Recorder.Eventf(s.dt, sr, corev1.EventTypeNormal, EventDeletingSpaceRequest, "Deprovision",
			"Deleting SpaceRequest %s; the target is released once it is gone", name)
	} else if c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady); c != nil &&
		c.Reason == toolchainv1alpha1.ReasonUnableToTerminate {
		log.Info("SpaceRequest is unable to terminate; still waiting", "message", c.Message)
		r.Recorder.Eventf(s.dt, sr, corev1.EventTypeWarning, EventSpaceRequestNotTerminate, "Deprovision",
			"SpaceRequest %s is unable to terminate (%s); the target keeps its finalizer until it is gone", name, c.Message)
	}
	// Its deletion event brings the target back.
	s.stop = true
	return nil
}

// confirmSpaceRequestGone asks the API server itself: the cache may lag
// behind a SpaceRequest created moments ago.
func (r *Reconciler) confirmSpaceRequestGone(ctx context.Context, s *scope) error {
	name := spaceRequestName(s.dt)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.dt.Namespace, Name: name}, &toolchainv1alpha1.SpaceRequest{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	// Still there: the cache will catch up and bring the target back.
	s.stop = true
	return nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) error {
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindTarget, "RemoveFinalizer")
	err := client.IgnoreNotFound(r.patchFinalizers(spanCtx, s.dt, func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}))
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("released target: its SpaceRequest is gone")
	r.Recorder.Eventf(s.dt, nil, corev1.EventTypeNormal, EventReleased, "Deprovision",
		"SpaceRequest %s is gone; removed finalizer %s", spaceRequestName(s.dt), appstudiov1alpha1.TargetFinalizer)
	return nil
}
