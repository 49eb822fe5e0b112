package claim

import (
	"context"
	"time"

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
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// DefaultTierName is the SpaceRequest tier used when the class's parameters
// name none.
const DefaultTierName = "appstudio-env"

// Event reasons (on the claim): problems only. Creating the SpaceRequest and
// the target is logged and traced; the binder's Bound event on the claim is
// the outcome. ClassNotFound, InvalidClassParameters and the SpaceRequest
// warnings are recorded once per distinct message while the claim waits
// (claimWarnings), not on every reconcile.
const (
	EventClassNotFound = "ClassNotFound"
	// EventClassProvisionerMismatch: the claim is marked for this
	// provisioner, but its class names another one; nothing is provisioned.
	EventClassProvisionerMismatch = "ClassProvisionerMismatch"
	EventInvalidParameters        = "InvalidClassParameters"
	EventCredentialsSecretAbsent  = "CredentialsSecretMissing"
	// EventSpaceRequestNotReady: the claim's SpaceRequest reports a reason
	// it is not Ready other than provisioning in progress, or is still not
	// Ready when the warning delay is over; the note quotes its condition.
	EventSpaceRequestNotReady = "SpaceRequestNotReady"
	// EventSpaceRequestUnanswered: the claim's SpaceRequest still has no
	// Ready condition when the warning delay is over: no SpaceRequest
	// controller handles it.
	EventSpaceRequestUnanswered = "SpaceRequestUnanswered"
	// EventProvisioningFailed: a reconcile failed with an error (creating
	// the SpaceRequest or the target, reading what it needs); it is retried
	// with back-off.
	EventProvisioningFailed = "ProvisioningFailed"
)

// Parameters are the DeploymentTargetClass parameters this provisioner reads.
// Unknown parameters are ignored.
type Parameters struct {
	// TierName is the SpaceRequest's spec.tierName.
	TierName string `json:"tierName,omitempty"`
	// TargetClusterRoles is the SpaceRequest's spec.targetClusterRoles.
	TargetClusterRoles []string `json:"targetClusterRoles,omitempty"`
	// NamespaceLimits size the provisioned namespace's ResourceQuota and
	// LimitRange; a field left out takes its default
	// (toolchainv1alpha1.DefaultNamespaceLimits). They reach the
	// SpaceRequest controller in the SpaceRequest's
	// toolchainv1alpha1.NamespaceLimitsAnnotation.
	NamespaceLimits *toolchainv1alpha1.NamespaceLimits `json:"namespaceLimits,omitempty"`
}

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler provisions for sandbox claims.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the credentials Secret directly (no Secret cache).
	APIReader client.Reader
	// Recorder records events on claims.
	Recorder events.EventRecorder

	// outcomes ends each reconcile and counts conflicts in a row per object
	// (flow.Outcomes).
	outcomes flow.Outcomes
	// DefaultTierName is the tier of SpaceRequests whose class names none.
	DefaultTierName string
	// SpaceRequestWarning is how long a SpaceRequest may show provisioning
	// in progress (no Ready condition, or reason Provisioning) before a
	// Warning on its claim says so; zero means DefaultSpaceRequestWarning.
	SpaceRequestWarning timeout.Timeout
	// Now is the clock of the SpaceRequest warnings; nil means time.Now.
	Now func() time.Time

	// warnings makes the claim's Warnings once per distinct message.
	warnings claimWarnings

	// created remembers the SpaceRequests and targets this process created
	// and its cache does not show yet, so that a reconcile from a stale
	// cache waits for their watch events instead of writing them again.
	created createdObjects
}

// SetupWithManager checks the reconciler's settings and registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setup.Check("claim", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder), setup.Required("DefaultTierName", r.DefaultTierName)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("claim").
		For(&appstudiov1alpha1.DeploymentTargetClaim{},
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return sandbox.WantsSandbox(o) }))).
		// The SpaceRequest becoming Ready, or going away.
		Watches(&toolchainv1alpha1.SpaceRequest{}, handler.EnqueueRequestsFromMapFunc(spaceRequestToClaim)).
		// The target being created or deleted.
		Watches(&appstudiov1alpha1.DeploymentTarget{}, handler.EnqueueRequestsFromMapFunc(targetToClaim)).
		// A class appearing (claims waiting for it) or changing.
		Watches(&appstudiov1alpha1.DeploymentTargetClass{}, handler.EnqueueRequestsFromMapFunc(r.classToClaims)).
		Complete(r)
}

// scope is the state of one reconcile.
type scope struct {
	claim  *appstudiov1alpha1.DeploymentTargetClaim
	class  *appstudiov1alpha1.DeploymentTargetClass
	params Parameters
	// limits are params.NamespaceLimits with the defaults filled in.
	limits toolchainv1alpha1.NamespaceLimits
	sr     *toolchainv1alpha1.SpaceRequest
	// reported: the error the steps return was already reported in an event.
	reported bool
}

// Reconcile provisions the claim's SpaceRequest and target. The reconcile is
// the span "DeploymentTargetClaim.Reconcile", continuing the trace the binder
// handed over in the claim's trace-context annotation; the SpaceRequest and
// the target are created carrying the trace on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.outcomes.Forget(req.NamespacedName)
			r.warnings.forget(req.NamespacedName)
		}
		// A deleted claim's SpaceRequest is the orphan reconciler's business.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindClaim, claim, "")
	defer func() { tracing.EndReconcile(span, string(claim.Status.Phase), retErr) }()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("spaceRequest", sandbox.ObjectName(claim)))
	s := &scope{claim: claim}
	res, err := flow.Run(ctx, s,
		r.checkWanted,
		r.checkTarget,
		r.loadClass,
		r.applySpaceRequest,
		r.waitForSpaceRequest,
		r.checkCredentialsSecret,
		r.createTarget,
	)
	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, func(err error) {
		if !s.reported {
			r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, EventProvisioningFailed, "Provision", "%v", err)
		}
	})
}
