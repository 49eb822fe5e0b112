package target

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// Event reasons (on the target).
const (
	EventDeletingSpaceRequest     = "DeletingSpaceRequest"
	EventSpaceRequestNotTerminate = "SpaceRequestUnableToTerminate"
	// EventDeprovisioned: the SpaceRequest of a target being deleted is
	// gone and the provisioner removed its finalizer, so the target's
	// deletion completes. (Not "Released": that is the phase of a target
	// whose claim went under reclaimPolicy Retain.)
	EventDeprovisioned = "Deprovisioned"
	// EventSpaceRequestDeletedOutOfBand: the SpaceRequest of a live target
	// is being deleted, or gone, and the provisioner did not delete it.
	EventSpaceRequestDeletedOutOfBand = "SpaceRequestDeletedOutOfBand"
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

	// outcomes ends each reconcile and counts conflicts in a row per object
	// (flow.Outcomes).
	outcomes flow.Outcomes

	// deletions are SpaceRequest deletions seen in watch events, by the
	// target of the SpaceRequest's name, for the target's next reconcile to
	// report; reported are those reported, so that each is reported once.
	deletions, reported byKey[types.UID]
	// unableReported is, per deleting target, the UnableToTerminate episode
	// of its SpaceRequest already reported (unableEpisode), so that one
	// episode is one Event: a deleting target is reconciled on every write
	// to it (the binder's Terminating condition, its Failed phase) and to
	// its SpaceRequest, not only when the SpaceRequest turns
	// UnableToTerminate.
	unableReported byKey[string]
}

// ours says whether this reconciler looks after target o: made by the
// provisioner, or carrying its finalizer, whatever its annotations say now
// (otherwise a target whose provisioned-by annotation was edited away could
// never lose the finalizer, and its deletion would hang for ever).
func ours(o client.Object) bool {
	return sandbox.ProvisionedBySandbox(o) || controllerutil.ContainsFinalizer(o, appstudiov1alpha1.TargetFinalizer)
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
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(e event.CreateEvent) bool { return ours(e.Object) },
				UpdateFunc:  func(e event.UpdateEvent) bool { return ours(e.ObjectNew) },
				GenericFunc: func(e event.GenericEvent) bool { return ours(e.Object) },
				// Every deletion: the reconcile forgets what it remembers
				// of the target (no request: the cache says it is gone).
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		// A SpaceRequest's deletion (or failure to terminate) brings its
		// target back. Target and SpaceRequest share their name.
		Watches(&toolchainv1alpha1.SpaceRequest{}, spaceRequestEvents{
			EventHandler: handler.EnqueueRequestsFromMapFunc(spaceRequestToTarget),
			deletions:    &r.deletions,
		}).
		Complete(r)
}

// scope is the state of one reconcile.
type scope struct {
	dt *appstudiov1alpha1.DeploymentTarget
}

// Reconcile keeps or releases a provisioned target's finalizer. The
// reconcile is the span "DeploymentTarget.Reconcile", continuing the trace
// handed over in the target's trace-context annotation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, req.NamespacedName, dt); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			r.unableReported.forget(req.NamespacedName)
			r.outcomes.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !dt.DeletionTimestamp.IsZero() || !ours(dt) {
		// Its SpaceRequest's deletion is this reconciler's own, or none
		// of its business.
		r.forget(req.NamespacedName)
	}
	if !ours(dt) {
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindTarget, dt, "")
	defer func() { tracing.EndReconcile(span, string(dt.Status.Phase), retErr) }()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("spaceRequest", spaceRequestName(dt)))
	s := &scope{dt: dt}
	var res flow.Result
	var err error
	if dt.DeletionTimestamp.IsZero() {
		res, err = flow.Run(ctx, s, r.ensureFinalizer, r.reportSpaceRequestDeletion)
	} else {
		res, err = flow.Run(ctx, s,
			r.checkFinalizerPresent,
			r.deleteSpaceRequest,
			r.confirmSpaceRequestGone,
			r.removeFinalizer,
		)
	}
	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, func(err error) {
		r.Recorder.Eventf(dt, nil, corev1.EventTypeWarning, EventDeprovisioningFailed, "Deprovision", "%v", err)
	})
}

// forget drops what the reconciler remembers of the target key.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.deletions.forget(key)
	r.reported.forget(key)
}

// spaceRequestName is the SpaceRequest backing dt: its annotation, else (for
// targets from before the annotation) the target's own name.
func spaceRequestName(dt *appstudiov1alpha1.DeploymentTarget) string {
	if n := dt.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]; n != "" {
		return n
	}
	return dt.Name
}
