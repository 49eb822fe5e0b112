package target

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// DefaultUnableToTerminateTimeout is how long after its deletion a
// SpaceRequest that reports UnableToTerminate may still exist before its
// target is marked Failed (seed 004, step 5: "still exists after 2 minutes").
const DefaultUnableToTerminateTimeout = 2 * time.Minute

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets/status,verbs=patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=list;watch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps DeploymentTarget status in step with its claim and its SpaceRequest.
type Reconciler struct {
	// Client reads from the manager's cache and writes with the binder's field owner.
	Client client.Client
	// APIReader reads from the API server directly: it confirms that a claim
	// the cache does not have is really gone before its target is reclaimed
	// (a rare path).
	APIReader client.Reader
	// Recorder emits Kubernetes Events on targets.
	Recorder events.EventRecorder
	// UnableToTerminateTimeout: see DefaultUnableToTerminateTimeout; zero means the default.
	UnableToTerminateTimeout time.Duration
	// Now returns the current time; nil means time.Now. Tests need no clock:
	// they shorten UnableToTerminateTimeout instead.
	Now func() time.Time

	// ownWrites: the target versions this controller's own writes replaced
	// (a reconcile of such a stale cached copy is skipped).
	ownWrites stale.Versions
	outcomes  flow.Outcomes
}

// SetupWithManager registers the reconciler. The field indexes of package
// binding must be registered on mgr first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := setup.Check("target reconciler", setup.Required("manager", mgr),
		setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader), setup.Required("Recorder", r.Recorder)); err != nil {
		return err
	}
	if r.UnableToTerminateTimeout < 0 {
		return fmt.Errorf("target reconciler: UnableToTerminateTimeout must not be negative, got %s", r.UnableToTerminateTimeout)
	}
	if r.UnableToTerminateTimeout == 0 {
		r.UnableToTerminateTimeout = DefaultUnableToTerminateTimeout
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	observability.RegisterMetrics()
	return ctrl.NewControllerManagedBy(mgr).
		Named("deploymenttarget").
		For(&appstudiov1alpha1.DeploymentTarget{}).
		Watches(&appstudiov1alpha1.DeploymentTargetClaim{}, handler.EnqueueRequestsFromMapFunc(r.targetsForClaim)).
		Watches(&toolchainv1alpha1.SpaceRequest{}, handler.EnqueueRequestsFromMapFunc(r.targetsForSpaceRequest)).
		WithOptions(opts).
		Complete(r)
}

// scope is what one reconcile knows and changes.
type scope struct {
	log    logr.Logger
	target *appstudiov1alpha1.DeploymentTarget
	// before is the status as stored: the base of the phase and condition
	// transitions that Events report.
	before *appstudiov1alpha1.DeploymentTarget
	// patcher writes the status, guarded by the resourceVersion read.
	patcher *status.Patcher
	// gone: the target does not exist (a write found it gone).
	gone bool
}

// steps is the seed's list for the target: its phase while it lives, its
// termination while it is deleted.
func (r *Reconciler) steps(t *appstudiov1alpha1.DeploymentTarget) []flow.Step[*scope] {
	if t.DeletionTimestamp != nil {
		return []flow.Step[*scope]{r.reconcileTermination}
	}
	return []flow.Step[*scope]{r.reconcileBinding}
}

// Reconcile computes the target's status and writes it once, preconditioned
// on the resourceVersion it was computed from. The reconcile is the span
// "DeploymentTarget.Reconcile", continuing the trace handed over in the
// target's trace-context annotation (by the provisioner that created it, or
// by the claim reconciler that claimed it).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, req.NamespacedName, dt); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.ownWrites.Stale(req.NamespacedName, dt.ResourceVersion) {
		// The cache has not caught up with the binder's own last status
		// write; its watch event brings the target back.
		logf.FromContext(ctx).V(1).Info("skipping a cached target older than the binder's last write", "resourceVersion", dt.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, observability.Tracer(), observability.KindTarget, dt, "")
	patcher, err := status.NewPatcher(r.Client, dt, status.RecordWrites(&r.ownWrites))
	if err != nil {
		tracing.EndReconcile(span, string(dt.Status.Phase), err)
		return ctrl.Result{}, err
	}
	patcher.Guard()
	s := &scope{log: logf.FromContext(ctx), target: dt, before: dt.DeepCopy(), patcher: patcher}

	res, stepErr := flow.Run(ctx, s, r.steps(dt)...)
	// persisted is the phase the target has on the API server after this
	// reconcile, as far as the binder knows.
	persisted := string(dt.Status.Phase)
	writeErr := r.writeStatus(ctx, s)
	if writeErr == nil && !s.patcher.Failed() {
		persisted = string(s.target.Status.Phase)
	}
	out, retErr := r.outcomes.Finish(ctx, req.NamespacedName, res, flow.Combine(stepErr, writeErr), r.report(s))
	if s.gone {
		observability.Targets.Forget(req.Namespace, req.Name)
	} else {
		observability.Targets.Phase(req.Namespace, req.Name, persisted)
	}
	tracing.EndReconcile(span, persisted, retErr)
	return out, retErr
}

// forget drops what the reconciler remembers of a target that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.ownWrites.Forget(key)
	r.outcomes.Forget(key)
	observability.Targets.Forget(key.Namespace, key.Name)
}
