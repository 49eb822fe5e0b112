package claim

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
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// DefaultRetryInterval is how soon a claim that lost every race for a matching
// target looks again (by then the cache shows who won).
const DefaultRetryInterval = 500 * time.Millisecond

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims/status,verbs=patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler binds DeploymentTargetClaims to DeploymentTargets and runs the
// claim side of their deletion.
type Reconciler struct {
	// Client reads from the manager's cache and writes with the binder's field owner.
	Client client.Client
	// APIReader reads from the API server directly, on rare paths only: it
	// settles a claimRef write whose outcome is unknown (a timeout), and
	// reads a SpaceRequest before a never-bound provisioned target is
	// released (reclaim.LateTarget).
	APIReader client.Reader
	// Recorder emits Kubernetes Events on claims.
	Recorder events.EventRecorder
	// RetryInterval: see DefaultRetryInterval; zero means the default.
	RetryInterval time.Duration

	exp expectations
	// ownWrites: the claim versions this controller's own writes replaced (a
	// reconcile of such a stale cached copy is skipped).
	ownWrites stale.Versions
	outcomes  flow.Outcomes
}

// SetupWithManager registers the reconciler. The field indexes of package
// binding must be registered on mgr first.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := setup.Check("claim reconciler", setup.Required("manager", mgr),
		setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader), setup.Required("Recorder", r.Recorder)); err != nil {
		return err
	}
	if r.RetryInterval < 0 {
		return fmt.Errorf("claim reconciler: RetryInterval must not be negative, got %s", r.RetryInterval)
	}
	if r.RetryInterval == 0 {
		r.RetryInterval = DefaultRetryInterval
	}
	observability.RegisterMetrics()
	return ctrl.NewControllerManagedBy(mgr).
		Named("deploymenttargetclaim").
		For(&appstudiov1alpha1.DeploymentTargetClaim{}).
		Watches(&appstudiov1alpha1.DeploymentTarget{}, handler.EnqueueRequestsFromMapFunc(r.claimsForTarget)).
		Watches(&appstudiov1alpha1.DeploymentTargetClass{}, handler.EnqueueRequestsFromMapFunc(r.claimsForClass)).
		WithOptions(opts).
		Complete(r)
}

// scope is what one reconcile knows and changes.
type scope struct {
	log    logr.Logger
	key    types.NamespacedName
	claim  *appstudiov1alpha1.DeploymentTargetClaim
	before *appstudiov1alpha1.DeploymentTargetClaim
	// patcher writes the status once, at the end, guarded by the
	// resourceVersion read.
	patcher *status.Patcher
	// class is nil when the claim's class does not exist.
	class *appstudiov1alpha1.DeploymentTargetClass
	// named are the cached targets whose claimRef names the claim (and not
	// an earlier claim object of its name).
	named []appstudiov1alpha1.DeploymentTarget
	// earlier are the cached targets whose claimRef names the claim's name
	// but records another claim UID: bound for an earlier claim object of
	// that name, which is gone (binding.ForEarlierClaim).
	earlier []appstudiov1alpha1.DeploymentTarget
	// gone: the claim does not exist after this reconcile's writes (its
	// finalizer was the last one).
	gone bool
	// link holds the annotations of the target the claim is bound to; its
	// trace context is linked from the reconcile span.
	link map[string]string
}

// steps is the seed's list for the claim: bind a live claim, reclaim the
// target of a deleted one. Both first apply the reclaimPolicy to targets
// left by an earlier claim object of the same name.
func (r *Reconciler) steps(c *appstudiov1alpha1.DeploymentTargetClaim) []flow.Step[*scope] {
	if c.DeletionTimestamp != nil {
		return []flow.Step[*scope]{r.requireFinalizer, r.loadClass, r.loadTargets, r.reclaimEarlier, r.reclaim}
	}
	return []flow.Step[*scope]{r.ensureFinalizer, r.loadClass, r.loadTargets, r.reclaimEarlier, r.bind}
}

// Reconcile runs the steps for the claim and writes what they changed in one
// metadata patch and one status patch, both preconditioned on the claim's
// resourceVersion so that a reconcile working from a stale cache can never
// overwrite a newer state.
//
// The reconcile is the span "DeploymentTargetClaim.Reconcile", continuing the
// trace handed over in the claim's trace-context annotation (a new trace for a
// claim that has none yet: the binder is the first controller to act on a claim).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.ownWrites.Stale(req.NamespacedName, claim.ResourceVersion) {
		// The cache has not caught up with the binder's own last write; its
		// watch event brings the claim back.
		logf.FromContext(ctx).V(1).Info("skipping a cached claim older than the binder's last write", "resourceVersion", claim.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, observability.Tracer(), observability.KindClaim, claim, "")
	patcher, err := status.NewPatcher(r.Client, claim, status.RecordWrites(&r.ownWrites))
	if err != nil {
		tracing.EndReconcile(span, string(claim.Status.Phase), err)
		return ctrl.Result{}, err
	}
	patcher.Guard()
	s := &scope{log: logf.FromContext(ctx), key: req.NamespacedName, claim: claim, before: claim.DeepCopy(), patcher: patcher}

	res, stepErr := flow.Run(ctx, s, r.steps(claim)...)
	// persisted is the phase the claim has on the API server after this
	// reconcile, as far as the binder knows; "" when the claim is gone.
	persisted := string(claim.Status.Phase)
	writeErr := r.write(ctx, s)
	if writeErr == nil {
		persisted = string(s.claim.Status.Phase)
		if s.gone {
			persisted = ""
		}
	}
	out, retErr := r.outcomes.Finish(ctx, s.key, res, flow.Combine(stepErr, writeErr), r.report(s, claim.DeletionTimestamp != nil))
	if s.gone {
		observability.Claims.Forget(req.Namespace, req.Name)
	} else {
		observability.Claims.Phase(req.Namespace, req.Name, persisted)
	}
	tracing.EndReconcile(span, persisted, retErr)
	return out, retErr
}

// forget drops what the reconciler remembers of a claim that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.exp.forget(key)
	r.ownWrites.Forget(key)
	r.outcomes.Forget(key)
	observability.Claims.Forget(key.Namespace, key.Name)
}
