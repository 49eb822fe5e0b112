// Package target is the dt-binder's DeploymentTarget reconciler. It writes
// only a target's status (phase, conditions): whether it is Available, Bound
// to the claim its claimRef names, Released, or — while being deleted —
// Failed because its SpaceRequest could not be terminated. It never writes a
// target's spec or finalizers: claimRef belongs to the claim reconciler and
// the provisioner, the finalizer to the provisioner.
package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// EventReconcileFailed: a reconcile of a target failed with an error; it is
// retried with back-off. Phase and Terminating transitions use the reason of
// the Bound or Terminating condition.
const EventReconcileFailed = "ReconcileFailed"

// Events of reclaimGoneClaim, on the target: its claim (recorded in
// ClaimAnnotation) was deleted without its finalizer running (removed by
// hand), and the reclaimPolicy of the target's class was applied for it —
// Delete: the target is deleted; Retain: its claimRef is cleared.
// EventClassNotFound (Warning): the class does not exist; the target is
// retained.
const (
	EventClaimForceDeletedTargetDeleted  = "ClaimForceDeletedTargetDeleted"
	EventClaimForceDeletedTargetReleased = "ClaimForceDeletedTargetReleased"
	EventClassNotFound                   = "ClassNotFound"
)

// Events of reclaimForClaimBoundElsewhere, on the target: it was made (or
// claimed) for a claim that got bound to another target (a provisioner's
// target of the claim's old class, arriving after the claim was marked
// again for its new class's and bound that one's target), and the
// reclaimPolicy of its class was applied: Delete deletes it, Retain clears
// its claimRef.
const (
	EventClaimBoundElsewhereTargetDeleted  = "ClaimBoundElsewhereTargetDeleted"
	EventClaimBoundElsewhereTargetReleased = "ClaimBoundElsewhereTargetReleased"
)

// DefaultUnableToTerminateTimeout is how long after its deletion a
// SpaceRequest that reports UnableToTerminate may still exist before its
// target is marked Failed (seed 004, step 5: "still exists after 2 minutes").
const DefaultUnableToTerminateTimeout = 2 * time.Minute

// conflictRetry is how soon a status write that lost a race is retried.
const conflictRetry = 500 * time.Millisecond

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets/status,verbs=get;patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps DeploymentTarget status in step with its claim and its SpaceRequest.
type Reconciler struct {
	// Client reads from the manager's cache and writes with the binder's field owner.
	Client client.Client
	// APIReader reads from the API server directly: it confirms that a claim
	// the cache no longer has is really gone before its target is reclaimed
	// (a rare path).
	APIReader client.Reader
	// Recorder emits Kubernetes Events on targets.
	Recorder events.EventRecorder
	// UnableToTerminateTimeout: see DefaultUnableToTerminateTimeout; zero means the default.
	UnableToTerminateTimeout time.Duration
	// Now returns the current time; nil means time.Now. Tests need no clock:
	// they shorten UnableToTerminateTimeout instead.
	Now func() time.Time

	// written: the target versions this reconciler's status writes replaced
	// (a reconcile of such a stale cached copy is skipped).
	written stale.Versions
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

// targetsForClaim maps a claim event to the targets whose claimRef names it
// and the target its spec.targetName names: their phase depends on the claim.
func (r *Reconciler) targetsForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*appstudiov1alpha1.DeploymentTargetClaim)
	if !ok {
		return nil
	}
	reqs := r.targetsNaming(ctx, c.Namespace, c.Name)
	if c.Spec.TargetName != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.TargetName}})
	}
	return reqs
}

// targetsForSpaceRequest maps a SpaceRequest to the targets it backs: those
// naming it in the spacerequest annotation and those naming the claim it is
// labelled with. A deleting target waits for it.
func (r *Reconciler) targetsForSpaceRequest(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if claim := appstudiov1alpha1.ClaimOf(o); claim != "" {
		reqs = r.targetsNaming(ctx, o.GetNamespace(), claim)
	}
	var list appstudiov1alpha1.DeploymentTargetList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{binding.TargetSpaceRequestIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping SpaceRequest to targets", "spaceRequest", o.GetName())
	}
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func (r *Reconciler) targetsNaming(ctx context.Context, namespace, claim string) []reconcile.Request {
	targets, err := binding.TargetsNamingClaim(ctx, r.Client, namespace, claim)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping to targets")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(targets))
	for i := range targets {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&targets[i])})
	}
	return reqs
}

type scope struct {
	log    logr.Logger
	target *appstudiov1alpha1.DeploymentTarget
	before *appstudiov1alpha1.DeploymentTarget
	result ctrl.Result
	// gone: the target no longer exists (the status write found it gone).
	gone bool
}

type phase func(ctx context.Context, s *scope) error

// Reconcile computes the target's status and writes it once, preconditioned
// on the resourceVersion it was computed from. The reconcile is the span
// "DeploymentTarget.Reconcile", continuing the trace handed over in the
// target's trace-context annotation (by the provisioner that created it, or
// by the claim reconciler that claimed it).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, req.NamespacedName, dt); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
			observability.Targets.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.Stale(req.NamespacedName, dt.ResourceVersion) {
		// The cache has not caught up with the binder's own last status
		// write; its watch event brings the target back.
		logf.FromContext(ctx).V(1).Info("skipping a cached target older than the binder's last write", "resourceVersion", dt.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, observability.Tracer(), observability.KindTarget, dt, "")
	log := logf.FromContext(ctx)
	s := &scope{log: log, target: dt, before: dt.DeepCopy()}
	// persisted is the phase the target has on the API server after this
	// reconcile, as far as the binder knows.
	persisted := string(dt.Status.Phase)
	defer func() {
		if retErr != nil {
			r.Recorder.Eventf(s.target, nil, "Warning", EventReconcileFailed, "Bind", "%v", retErr)
		}
		if s.gone {
			observability.Targets.Forget(req.Namespace, req.Name)
		} else {
			observability.Targets.Phase(req.Namespace, req.Name, persisted)
		}
		tracing.EndReconcile(span, persisted, retErr)
	}()
	defer func() {
		err := r.patchStatus(ctx, s)
		switch {
		case err == nil:
			persisted = string(s.target.Status.Phase)
		case apierrors.IsConflict(err):
			log.V(1).Info("target changed during reconcile, retrying", "error", err.Error())
			span.AddEvent("conflict")
			res = ctrl.Result{RequeueAfter: conflictRetry}
		default:
			retErr = errors.Join(retErr, err)
		}
	}()

	phases := []phase{r.reconcileBinding}
	if dt.DeletionTimestamp != nil {
		phases = []phase{r.reconcileTermination}
	}
	for _, p := range phases {
		if err := p(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return s.result, nil
}

// reconcileBinding sets the phase of a target that is not being deleted:
//   - no claimRef: Available, or Released if it was bound before (rule A/C:
//     a Released target is not bound again until an operator makes it
//     Available);
//   - claimRef naming a claim that is gone, while the target records the
//     claim object it was bound for (ClaimAnnotation): that claim was deleted
//     without its finalizer running, so the reclaimPolicy of the target's
//     class is applied for it (reclaimGoneClaim), as the PV controller does
//     for a volume whose bound claim UID no longer exists;
//   - claimRef naming a claim that is gone, no record: Released if it was
//     bound before (rule A), else Pending (reserved for a claim yet to come:
//     a user pre-bound it, or it was bound before the record existed);
//   - claimRef naming a claim being deleted that has not bound this target:
//     Pending, ClaimDeleting (a claim being deleted binds nothing new);
//   - claimRef naming an existing claim that takes this target: Bound (step 7);
//     Bound too, reason ClassChanged, when the claim's class was changed
//     after it bound this target (the claim keeps it);
//   - otherwise Pending, with the reason in the Bound condition.
func (r *Reconciler) reconcileBinding(ctx context.Context, s *scope) error {
	t := s.target
	prev := t.Status.Phase
	wasBound := prev == appstudiov1alpha1.DeploymentTargetPhaseBound || prev == appstudiov1alpha1.DeploymentTargetPhaseReleased

	if t.Spec.ClaimRef == nil || t.Spec.ClaimRef.Name == "" {
		s.unclaimed(wasBound)
		return nil
	}

	name := t.Spec.ClaimRef.Name
	recorded := binding.RecordedClaimUID(t)
	if prev == appstudiov1alpha1.DeploymentTargetPhaseReleased && recorded == "" {
		// A claim of the same name appearing later is a new claim, not the
		// one this target served: it must not inherit the target.
		return nil
	}
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, claim)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting claim %s: %w", name, err)
	}
	if apierrors.IsNotFound(err) && recorded != "" {
		return r.reclaimGoneClaim(ctx, s, wasBound)
	}
	if prev == appstudiov1alpha1.DeploymentTargetPhaseReleased {
		// Released, and a claim of its name exists: a new claim (the claim
		// reconciler applies the policy for the old one, reclaimEarlier),
		// or the one it was bound to, which let it go. Either way it is
		// not bound again.
		return nil
	}
	// A claim of that name that is not the object the claimRef was written
	// for (its UID differs from the recorded one) is a new claim: the one
	// this target was bound to is gone, as for a PersistentVolume whose
	// claimRef UID no longer exists. The claim reconciler applies the
	// target's reclaimPolicy for the gone claim.
	if earlier := err == nil && binding.ForEarlierClaim(t, claim); err != nil || earlier {
		gone := fmt.Sprintf("claim %s was deleted", name)
		if earlier {
			gone = fmt.Sprintf("claim %s (UID %s) was deleted; the claim now of that name (UID %s) is another object and does not inherit this target",
				name, recorded, claim.UID)
		}
		if wasBound {
			s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased, gone)
			return nil
		}
		if earlier {
			s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimNotFound,
				"reserved for a claim that is gone: "+gone)
			return nil
		}
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimNotFound,
			fmt.Sprintf("reserved for claim %s, which does not exist", name))
		return nil
	}
	if claim.DeletionTimestamp != nil && prev != appstudiov1alpha1.DeploymentTargetPhaseBound {
		// A claim being deleted binds nothing new: its finalizer applies the
		// reclaimPolicy to this target if the claim holds it by a durable
		// fact (binding.ReclaimedTarget; a late one is left to its
		// provisioner); one that only names the claim is left as it is,
		// ClaimNotFound once the claim is gone.
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimDeleting,
			fmt.Sprintf("claim %s is being deleted and never bound this target", name))
		return nil
	}
	named, err := binding.TargetsNamingClaim(ctx, r.Client, t.Namespace, name)
	if err != nil {
		return err
	}
	if held := boundElsewhere(claim, t, named); held != "" {
		return r.reclaimForClaimBoundElsewhere(ctx, s, claim, held)
	}
	if claim.Spec.DeploymentTargetClassName != t.Spec.DeploymentTargetClassName {
		if held := binding.HeldTarget(claim, named); held != nil && held.Name == t.Name {
			// The claim's class was changed after it bound this target: the
			// claim keeps it (and reports ClassChanged), so the target stays
			// Bound, under its own class.
			s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonClassChanged,
				fmt.Sprintf("bound to claim %s, whose class was changed to %q after binding; this target keeps class %q and its reclaimPolicy",
					name, claim.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName))
			return nil
		}
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClassMismatch,
			fmt.Sprintf("claim %s asks for class %q, this target is of class %q", name, claim.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName))
		return nil
	}
	if claim.Spec.TargetName != "" && claim.Spec.TargetName != t.Name {
		if held := binding.HeldTarget(claim, named); held != nil && held.Name == t.Name && binding.BindComplete(claim) {
			// spec.targetName was changed after the claim bound this
			// target: the claim keeps it (and reports TargetNameConflict),
			// so the target stays Bound. Reported Pending, the claim would
			// read as unbound to everything deciding from this status.
			s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonBound,
				fmt.Sprintf("bound to claim %s, whose spec.targetName was changed to %s after binding; the claim keeps this target", name, claim.Spec.TargetName))
			return nil
		}
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimHasOtherTarget,
			fmt.Sprintf("claim %s asks for target %s", name, claim.Spec.TargetName))
		return nil
	}
	if chosen := binding.BoundTarget(claim, named); chosen != nil && chosen.Name != t.Name {
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonClaimHasOtherTarget,
			fmt.Sprintf("claim %s is bound to target %s", name, chosen.Name))
		return nil
	}
	s.set(appstudiov1alpha1.DeploymentTargetPhaseBound, metav1.ConditionTrue, appstudiov1alpha1.TargetReasonBound,
		fmt.Sprintf("bound to claim %s", name))
	return nil
}

// unclaimed sets the phase of a target without claimRef: Released if it was
// bound before (a Released target is not bound again until an operator sets
// its phase to Available), else Available.
func (s *scope) unclaimed(wasBound bool) {
	if wasBound {
		s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased,
			"its claim released it; it is not bound again until its phase is set to Available")
		return
	}
	s.set(appstudiov1alpha1.DeploymentTargetPhaseAvailable, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonAvailable,
		"unclaimed; can be bound to a claim of class "+s.target.Spec.DeploymentTargetClassName)
}

// reclaimGoneClaim applies the reclaimPolicy of the target's class for the
// claim it was bound to (recorded in ClaimAnnotation), which the cache no
// longer has: the claim was deleted without its finalizer running (removed
// by hand), so its deletion never reclaimed the target, and no new claim of
// its name has come to do it (the claim reconciler's reclaimEarlier). Left
// alone, the target would stay Released, naming a claim that is gone, for
// ever, and a provisioned target (class Delete) would leak its SpaceRequest
// and namespace. A target without the record (pre-bound by a user to a claim
// that has not bound it yet, or bound before the record existed) never gets
// here.
//
// The cache may lag behind the API server, so the claim is confirmed gone
// there first (APIReader; this path is rare, the normal path pays nothing):
// a claim still there with the recorded UID is alive, and the target is left
// as it is (the claim's watch event brings it back once the cache shows the
// claim). A claim of the name with another UID is a new object: the one
// recorded is gone all the same. The policy is then applied by applyPolicy
// (Delete: deleted; Retain: released).
//
// The claim reconciler's reclaimEarlier may apply the same policy to the same
// target at once (a new claim of the name appeared): whichever writes second
// gets a Conflict (retried: the target has moved on) or finds the target
// already deleted; neither is an error.
func (r *Reconciler) reclaimGoneClaim(ctx context.Context, s *scope, wasBound bool) error {
	t := s.target
	name, recorded := t.Spec.ClaimRef.Name, binding.RecordedClaimUID(t)
	live := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, live)
	switch {
	case err == nil && string(live.UID) == recorded:
		s.log.V(1).Info("claim not in the cache yet, but alive on the API server; not reclaiming", "claim", name, "claimUID", recorded)
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("confirming claim %s is gone: %w", name, err)
	}
	gone := fmt.Sprintf("claim %s (UID %s) was deleted without its finalizer running", name, recorded)
	return r.applyPolicy(ctx, s, wasBound, appstudiov1alpha1.TargetReasonClaimNotFound, gone, EventClaimForceDeletedTargetDeleted, EventClaimForceDeletedTargetReleased)
}

// boundElsewhere returns the name of the target claim is bound to when that
// is not t, although t was made or claimed for this claim object (t records
// its UID) and never bound to it; "" otherwise. That is a target the claim
// does not need: typically the one the old class's provisioner made for a
// claim marked again for another class's provisioner (ProvisionerChanged)
// while its SpaceRequest was in flight, after the claim had bound the new
// class's target. Decided from durable facts, as the PersistentVolume
// controller decides it (the claim's volumeName names another volume): the
// claim is bind-complete, its spec.targetName names the other target, which
// is the one it holds; t never reported Bound (a target the claim bound and
// keeps after a spec.targetName change is Bound, and stays the claim's).
func boundElsewhere(claim *appstudiov1alpha1.DeploymentTargetClaim, t *appstudiov1alpha1.DeploymentTarget, named []appstudiov1alpha1.DeploymentTarget) string {
	if claim.DeletionTimestamp != nil || !binding.BindComplete(claim) || binding.RecordedClaimUID(t) != string(claim.UID) ||
		t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound || claim.Spec.TargetName == "" || claim.Spec.TargetName == t.Name {
		return ""
	}
	if held := binding.HeldTarget(claim, named); held != nil && held.Name == claim.Spec.TargetName &&
		held.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound {
		return held.Name
	}
	return ""
}

// reclaimForClaimBoundElsewhere applies the reclaimPolicy of t's class to a
// target its claim does not need (boundElsewhere), as the PersistentVolume
// controller does for a volume provisioned for a claim that got bound to
// another: Delete deletes it (its provisioner then deletes its SpaceRequest),
// Retain clears its claimRef (Available; not a late target, which its
// provisioner deletes). Left naming the claim, it would wait for ever with
// a reason only, and, should the claim's target go, the claim could take
// it, a target it never bound, instead of turning Lost. Rare: it takes a
// class change while a provisioner was at work.
func (r *Reconciler) reclaimForClaimBoundElsewhere(ctx context.Context, s *scope, claim *appstudiov1alpha1.DeploymentTargetClaim, held string) error {
	why := fmt.Sprintf("claim %s (UID %s), for which this target was made or claimed, is bound to target %s; it does not need this one", claim.Name, claim.UID, held)
	return r.applyPolicy(ctx, s, false, appstudiov1alpha1.TargetReasonClaimHasOtherTarget, why, EventClaimBoundElsewhereTargetDeleted, EventClaimBoundElsewhereTargetReleased)
}

// applyPolicy applies the reclaimPolicy of the target's class for a claim
// that no longer needs the target (why says which, and why), with Event
// deletedEvent or releasedEvent on the target:
//
//   - Delete: the target's status is written first (Released if it was bound,
//     else Pending with pendingReason; the write, preconditioned on the version
//     read, also proves the cached target current), then the target is
//     deleted (UID precondition).
//   - Retain, or a class that does not exist: its claimRef is cleared as on
//     a normal deletion (reclaim.Release, preconditioned on the version
//     read), and it turns Released (Available if it was never bound); a
//     late target (reclaim.LateTarget) is left to its provisioner, Pending
//     with pendingReason.
func (r *Reconciler) applyPolicy(ctx context.Context, s *scope, wasBound bool, pendingReason, why, deletedEvent, releasedEvent string) error {
	t := s.target
	name, recorded := t.Spec.ClaimRef.Name, binding.RecordedClaimUID(t)
	className := t.Spec.DeploymentTargetClassName
	class, err := reclaim.GetClass(ctx, r.Client, className)
	if err != nil {
		return err
	}
	policy := reclaim.Policy(class)
	if class == nil {
		r.Recorder.Eventf(t, nil, "Warning", EventClassNotFound, "Reclaim",
			"DeploymentTargetClass %q does not exist; retaining the target: %s", className, why)
	}
	log := s.log.WithValues("claim", name, "claimUID", recorded, "class", className, "reclaimPolicy", policy)

	if policy == appstudiov1alpha1.ReclaimPolicyRetain {
		if late, err := reclaim.LateTarget(ctx, r.APIReader, t); err != nil || late {
			if late {
				log.Info("not releasing a never-bound target whose SpaceRequest is going; its provisioner deletes it")
				s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, pendingReason,
					fmt.Sprintf("%s; this target was never bound and its SpaceRequest %s is being deleted, so it is not released: its provisioner deletes it",
						why, t.Annotations[appstudiov1alpha1.SpaceRequestAnnotation]))
			}
			return err
		}
		old := t.ResourceVersion
		released, err := reclaim.Release(ctx, r.Client, observability.KindTarget, t)
		switch {
		case apierrors.IsConflict(err):
			// Changed meanwhile (by reclaimEarlier, say): its newer version
			// is on its way, and decides again.
			log.V(1).Info("target changed before its release, retrying", "error", err.Error())
			s.result.RequeueAfter = conflictRetry
			return nil
		case err != nil:
			return err
		case released == nil:
			s.gone = true // deleted meanwhile: nothing left to report
			return nil
		}
		r.written.Replaced(client.ObjectKeyFromObject(t), old)
		s.target, s.before = released, released.DeepCopy()
		s.unclaimed(wasBound)
		log.Info("released target: its claim no longer needs it", "why", why)
		r.Recorder.Eventf(s.target, nil, "Normal", releasedEvent, "Reclaim",
			"%s; released this target for it (class %s, reclaimPolicy Retain): claimRef cleared", why, className)
		return nil
	}

	msg := why + fmt.Sprintf("; deleting this target (class %s, reclaimPolicy Delete)", className)
	if wasBound {
		s.set(appstudiov1alpha1.DeploymentTargetPhaseReleased, metav1.ConditionFalse, appstudiov1alpha1.TargetReasonReleased, msg)
	} else {
		s.set(appstudiov1alpha1.DeploymentTargetPhasePending, metav1.ConditionFalse, pendingReason, msg)
	}
	err = r.patchStatus(ctx, s)
	switch {
	case apierrors.IsConflict(err):
		log.V(1).Info("target changed before its deletion, retrying", "error", err.Error())
		s.target.Status = *s.before.Status.DeepCopy() // nothing more to write
		s.result.RequeueAfter = conflictRetry
		return nil
	case err != nil:
		return err
	case s.gone:
		return nil
	}
	// Written: the deferred status write has nothing left to do.
	s.before = s.target.DeepCopy()
	if err := reclaim.Delete(ctx, r.Client, observability.KindTarget, t); err != nil {
		return err
	}
	log.Info("deleting target: its claim no longer needs it", "why", why)
	r.Recorder.Eventf(s.target, nil, "Normal", deletedEvent, "Reclaim",
		"%s; deleting this target for it (class %s, reclaimPolicy Delete)", why, className)
	return nil
}

// reconcileTermination follows a target being deleted (seed 004, step 5).
// The provisioner deletes the SpaceRequest and removes the target's finalizer
// once it is gone; the binder only reports: when the SpaceRequest has
// reported UnableToTerminate for longer than the timeout, the target turns
// Failed (its cluster resources were not cleaned up). Failed does not end the
// wait: when the SpaceRequest finally goes, the provisioner completes the
// deletion. The phase is otherwise left alone, so that a claim still sees
// which target it was bound to.
func (r *Reconciler) reconcileTermination(ctx context.Context, s *scope) error {
	srs, err := r.spaceRequests(ctx, s.target)
	if err != nil {
		return err
	}
	t := s.target
	if srs == nil {
		return nil // nothing names a SpaceRequest the binder could follow
	}
	if len(srs.Items) == 0 {
		s.setTerminating(appstudiov1alpha1.TerminatingReasonSpaceRequestGone,
			fmt.Sprintf("no SpaceRequest is left; waiting for finalizers %v", t.Finalizers))
		return nil
	}
	now := r.Now()
	for i := range srs.Items {
		sr := &srs.Items[i]
		ready := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
		if ready == nil || ready.Reason != toolchainv1alpha1.ReasonUnableToTerminate {
			continue
		}
		// Seed 004, step 5: Failed "if the SpaceRequest still exists after 2
		// minutes, and has" Ready reason UnableToTerminate. The 2 minutes
		// run from its deletion (step 3), not from when it began to report
		// UnableToTerminate: the SpaceRequest controller reports that only
		// after 2 minutes of failing to delete the Space, so counting from
		// the report would make the target Failed after 4.
		since := deletionStart(t, sr)
		deadline := since.Add(r.UnableToTerminateTimeout)
		if now.Before(deadline) {
			// Come back when the timeout expires; an event from the
			// SpaceRequest (gone, recovered) may come first.
			s.result.RequeueAfter = deadline.Sub(now) + 100*time.Millisecond
			s.setTerminating(appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest,
				fmt.Sprintf("SpaceRequest %s reports UnableToTerminate (%s) since %s; the target turns Failed if it still exists at %s (%s after its deletion)",
					sr.Name, ready.Message, ready.LastTransitionTime.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339), r.UnableToTerminateTimeout))
			return nil
		}
		if t.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseFailed {
			s.log.Info("SpaceRequest unable to terminate; target failed", "spaceRequest", sr.Name,
				"deletedAt", since, "unableToTerminateSince", ready.LastTransitionTime.Time)
		}
		t.Status.Phase = appstudiov1alpha1.DeploymentTargetPhaseFailed
		s.setTerminating(appstudiov1alpha1.TerminatingReasonUnableToTerminate,
			fmt.Sprintf("SpaceRequest %s still exists more than %s after its deletion and reports UnableToTerminate (%s): the cluster resources were not cleaned up; deletion completes when it is gone",
				sr.Name, r.UnableToTerminateTimeout, ready.Message))
		return nil
	}
	s.setTerminating(appstudiov1alpha1.TerminatingReasonWaitingForSpaceRequest,
		fmt.Sprintf("waiting for SpaceRequest %s to be deleted", srs.Items[0].Name))
	return nil
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

// patchStatus writes the status if it changed and emits an Event when the
// phase changed, or — the phase unchanged — when the Terminating condition
// changed its reason.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	summarize(s.target)
	if equality.Semantic.DeepEqual(s.before.Status, s.target.Status) {
		return nil
	}
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindTarget, "PatchStatus",
		tracing.AttrPhase.String(string(s.target.Status.Phase)))
	err := r.Client.Status().Patch(spanCtx, s.target, client.MergeFromWithOptions(s.before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		tracing.EndStep(span, err)
		return fmt.Errorf("patching target status: %w", err)
	}
	tracing.EndStep(span, nil)
	if err != nil {
		s.gone = true
		return nil
	}
	if s.target.ResourceVersion != s.before.ResourceVersion {
		r.written.Replaced(client.ObjectKeyFromObject(s.target), s.before.ResourceVersion)
	}
	if s.before.Status.Phase != s.target.Status.Phase {
		reason, note := string(s.target.Status.Phase), ""
		if c := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionBound); c != nil {
			reason, note = c.Reason, c.Message
		}
		eventType := "Normal"
		if s.target.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseFailed {
			eventType = "Warning"
			if c := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionTerminating); c != nil {
				reason, note = c.Reason, c.Message
			}
		}
		s.log.Info("target phase changed", "from", s.before.Status.Phase, "to", s.target.Status.Phase, "reason", reason)
		r.Recorder.Eventf(s.target, nil, eventType, reason, "Bind", "%s", note)
		return nil
	}
	now := meta.FindStatusCondition(s.target.Status.Conditions, appstudiov1alpha1.ConditionTerminating)
	if now == nil {
		return nil
	}
	if old := meta.FindStatusCondition(s.before.Status.Conditions, appstudiov1alpha1.ConditionTerminating); old != nil && old.Reason == now.Reason {
		return nil
	}
	eventType := "Normal"
	if now.Reason == appstudiov1alpha1.TerminatingReasonUnableToTerminate {
		eventType = "Warning"
	}
	s.log.Info("target termination changed", "reason", now.Reason, "message", now.Message)
	r.Recorder.Eventf(s.target, nil, eventType, now.Reason, "Terminate", "%s", now.Message)
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
	ready := metav1.Condition{Type: appstudiov1alpha1.TargetConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: t.Generation}
	bound := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.ConditionBound)
	terminating := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.ConditionTerminating)
	switch {
	case t.DeletionTimestamp != nil && terminating != nil:
		ready.Reason, ready.Message = terminating.Reason, terminating.Message
	case t.DeletionTimestamp != nil:
		ready.Reason = appstudiov1alpha1.TargetReasonDeleting
		ready.Message = fmt.Sprintf("being deleted; waiting for finalizers %v", t.Finalizers)
	case bound != nil:
		ready.Reason, ready.Message = bound.Reason, bound.Message
		if t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseAvailable || t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound {
			ready.Status = metav1.ConditionTrue
		}
	default:
		return
	}
	meta.SetStatusCondition(&t.Status.Conditions, ready)
}

func (s *scope) set(phase appstudiov1alpha1.DeploymentTargetPhase, status metav1.ConditionStatus, reason, message string) {
	s.target.Status.Phase = phase
	s.target.Status.ObservedGeneration = s.target.Generation
	meta.SetStatusCondition(&s.target.Status.Conditions, metav1.Condition{
		Type: appstudiov1alpha1.ConditionBound, Status: status, Reason: reason, Message: message,
		ObservedGeneration: s.target.Generation,
	})
}

func (s *scope) setTerminating(reason, message string) {
	s.target.Status.ObservedGeneration = s.target.Generation
	meta.SetStatusCondition(&s.target.Status.Conditions, metav1.Condition{
		Type: appstudiov1alpha1.ConditionTerminating, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: s.target.Generation,
	})
}
