package orphan

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// Event reasons (on the SpaceRequest).
const (
	EventOrphanDeleted  = "OrphanDeleted"
	EventOrphanRetained = "OrphanRetained"
	// EventOrphanCleanupFailed: a reconcile of an orphaned SpaceRequest
	// failed with an error; it is retried with back-off.
	EventOrphanCleanupFailed = "OrphanCleanupFailed"
)

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler cleans up orphaned SpaceRequests.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader confirms an orphan directly with the API server before
	// anything is deleted.
	APIReader client.Reader
	// Recorder records events on SpaceRequests.
	Recorder events.EventRecorder

	// outcomes ends each reconcile and counts conflicts in a row per object
	// (flow.Outcomes).
	outcomes flow.Outcomes
}

// SetupWithManager checks the reconciler's settings and registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setup.Check("orphan", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder)); err != nil {
		return err
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[appstudiov1alpha1.ClaimLabel] != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("orphan").
		For(&toolchainv1alpha1.SpaceRequest{}, builder.WithPredicates(ours)).
		// A claim deleted (or marked for deletion) may leave an orphan.
		Watches(&appstudiov1alpha1.DeploymentTargetClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimToSpaceRequests)).
		// So may a target deleted after its claim.
		Watches(&appstudiov1alpha1.DeploymentTarget{}, handler.EnqueueRequestsFromMapFunc(targetToSpaceRequest)).
		Complete(r)
}

type scope struct {
	sr *toolchainv1alpha1.SpaceRequest
	// claim is what the last claim check (the API server's, once past the
	// cache) found.
	claim claimUse
	// orphanTarget is a target made from the SpaceRequest for the claim
	// that is gone, never bound: deleted instead of the SpaceRequest.
	orphanTarget *appstudiov1alpha1.DeploymentTarget
}

type step = flow.Step[*scope]

// Reconcile deletes the SpaceRequest if it is an orphan. The reconcile is the
// span "SpaceRequest.Reconcile", continuing the trace handed over in the
// SpaceRequest's trace-context annotation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	sr := &toolchainv1alpha1.SpaceRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Gone: a target may still have been made from it (late target).
		return r.reconcileLateTarget(ctx, req.NamespacedName)
	}
	if sr.Labels[appstudiov1alpha1.ClaimLabel] == "" {
		return ctrl.Result{}, nil
	}
	if !sr.DeletionTimestamp.IsZero() {
		return r.reconcileLateTarget(ctx, req.NamespacedName)
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, sr, "")
	defer func() { tracing.EndReconcile(span, "", retErr) }()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("claim", appstudiov1alpha1.ClaimOf(sr)))
	res, err := flow.Run(ctx, &scope{sr: sr},
		r.checkClaim(r.Client),
		r.checkClaim(r.APIReader), // confirm with the API server before deleting
		r.checkTarget,
		r.deleteUnusedSpaceRequest,
		r.reclaimOrphanTarget,
	)
	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, func(err error) {
		r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, EventOrphanCleanupFailed, "Reclaim", "%v", err)
	})
}
