// Package orphan deletes SpaceRequests the sandbox-provisioner created that
// nothing will use any more: their claim is gone (or being deleted, or
// replaced by a new claim of the same name, or now names another target in
// spec.targetName, so that the binder binds it to that target only) and no
// DeploymentTarget was made from them. Such a SpaceRequest is deleted
// whatever the class's reclaimPolicy says: the policy is about a claim's
// target, what a bound claim handed out (seed 004: Retain keeps the target
// and what it points to), and this SpaceRequest never backed a target;
// nothing refers to it, and kept it would hold a namespace for ever.
//
// A target made from the SpaceRequest in the moment its claim went (the
// provisioner's cache still showed the claim) was never bound: it is an
// orphan too. It is a target, so its class's reclaimPolicy applies: with
// Delete it is deleted, which deletes the SpaceRequest (package target), and
// a later claim of the same name does not inherit it; with Retain it is kept
// and an event says so. A class that no longer exists counts as Retain, as
// in the dt-binder: deleting what no policy asked to delete is the one
// mistake that cannot be undone.
//
// The race with the provisioner's claim reconciler cannot be closed by
// reading alone: its cache may still show the claim (and the SpaceRequest
// alive) after this reconciler has confirmed with the API server that the
// claim is gone and no target exists, and deleted the SpaceRequest; Kubernetes
// has no transaction across the two objects. So the deletion is made safe
// after the fact: a target created for a SpaceRequest that is being deleted
// or gone, whose claim is gone, and that was never bound (a "late target") is
// deleted as soon as its creation event arrives, whatever its class's
// reclaimPolicy: what Retain would keep, the namespace its credentials point
// to, is already being deleted, and nothing ever used the target. The same
// holds for a claim that names another target: its late target is deleted
// too (the binder would otherwise count it as held by the claim and refuse
// the target the claim names).
package orphan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=get;list;watch
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

func (r *Reconciler) claimToSpaceRequests(ctx context.Context, o client.Object) []reconcile.Request {
	srs := &toolchainv1alpha1.SpaceRequestList{}
	if err := r.Client.List(ctx, srs, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(o.GetName())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing SpaceRequests of a claim", "claim", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(srs.Items))
	for i := range srs.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&srs.Items[i])})
	}
	return reqs
}

func targetToSpaceRequest(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetAnnotations()[appstudiov1alpha1.SpaceRequestAnnotation]
	if name == "" || !sandbox.ProvisionedBySandbox(o) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
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

// reconcileLateTarget deletes a target made from the SpaceRequest key (being
// deleted, or gone) for a claim that is gone, and never bound: a provisioner
// whose cache still showed the claim and the SpaceRequest created it after
// this reconciler had deleted the SpaceRequest (see the package comment).
// Only the cache is read until such a target is found (the normal path, a
// target of a live claim, or one being deleted, costs no request); then the
// API server confirms the claim is gone and the target never bound.
func (r *Reconciler) reconcileLateTarget(ctx context.Context, key types.NamespacedName) (_ ctrl.Result, retErr error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, key, dt); err != nil {
		if apierrors.IsNotFound(err) {
			r.outcomes.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !lateTargetCandidate(dt, key.Name) {
		r.outcomes.Forget(key)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindTarget, dt, "")
	defer func() { tracing.EndReconcile(span, "", retErr) }()
	// Reported on the target: the SpaceRequest may be gone.
	return r.outcomes.Finish(ctx, key, flow.Continue(), r.deleteLateTarget(ctx, key, dt), func(err error) {
		r.Recorder.Eventf(dt, nil, corev1.EventTypeWarning, EventOrphanCleanupFailed, "Reclaim", "%v", err)
	})
}

// deleteLateTarget deletes dt, a late target candidate of the SpaceRequest
// key in the cache, once the API server confirms it.
func (r *Reconciler) deleteLateTarget(ctx context.Context, key types.NamespacedName, dt *appstudiov1alpha1.DeploymentTarget) error {
	claim := claimName(dt)
	log := ctrl.LoggerFrom(ctx).WithValues("target", dt.Name, "claim", claim)
	use := claimGone
	for _, reader := range []client.Reader{r.Client, r.APIReader} {
		if claim == "" {
			break // released: no claim holds it
		}
		var err error
		if use, err = claimUseOf(ctx, reader, dt.Namespace, claim, dt.Name); err != nil || use == claimUses {
			return err
		}
	}
	// Confirm the target itself: still never bound, and delete exactly the
	// version looked at.
	if err := r.APIReader.Get(ctx, key, dt); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !lateTargetCandidate(dt, key.Name) {
		return nil
	}
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphanTarget")
	err := client.IgnoreNotFound(r.Client.Delete(spanCtx, dt, client.Preconditions{UID: &dt.UID, ResourceVersion: &dt.ResourceVersion}))
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("deleting DeploymentTarget %s made from a deleted SpaceRequest: %w", dt.Name, err)
	}
	log.Info("deleted a target made from a SpaceRequest that was deleted as an orphan: its claim does not use it and it was never bound", "claimState", use.String())
	// On the target: the SpaceRequest may be gone.
	what := fmt.Sprintf("Claim %s is gone and this target", claim)
	switch {
	case claim == "":
		what = "This target, released,"
	case use == claimRedirected:
		what = fmt.Sprintf("Claim %s names another target in spec.targetName and this target", claim)
	}
	r.Recorder.Eventf(dt, nil, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"%s, never bound, was made from SpaceRequest %s, which is being deleted (or gone) as an orphan; "+
			"deleted it whatever the class's reclaimPolicy: the namespace it points to is being deleted", what, key.Name)
	return nil
}

// lateTargetCandidate: dt was made by this provisioner from the SpaceRequest
// named srName, is not being deleted, and never bound. It names a claim, or
// none because a binder released it (reclaimPolicy Retain) before it saw the
// SpaceRequest going (reclaim.LateTarget in dt-binder); either way nothing
// uses it, and a released one would be offered to the next claim.
func lateTargetCandidate(dt *appstudiov1alpha1.DeploymentTarget, srName string) bool {
	return dt.DeletionTimestamp.IsZero() && sandbox.ProvisionedBySandbox(dt) &&
		dt.Annotations[appstudiov1alpha1.SpaceRequestAnnotation] == srName && neverBound(dt)
}

// claimName is the claim dt's claimRef names ("" when it has none).
func claimName(dt *appstudiov1alpha1.DeploymentTarget) string {
	if dt.Spec.ClaimRef == nil {
		return ""
	}
	return dt.Spec.ClaimRef.Name
}

func neverBound(dt *appstudiov1alpha1.DeploymentTarget) bool {
	return dt.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseBound && dt.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseReleased
}

// claimUse is whether the claim an object was made for may still use it.
type claimUse int

const (
	// claimUses: the claim exists, is not being deleted, is the claim
	// object the object was made for, and names no other target.
	claimUses claimUse = iota
	// claimGone: the claim is gone, being deleted, or another claim object
	// of the same name.
	claimGone
	// claimRedirected: the claim lives on, but its spec.targetName names
	// another target; the binder binds it to that one only, and the
	// provisioner makes nothing more for it (sandbox.NamesOtherTarget).
	claimRedirected
)

func (u claimUse) String() string {
	switch u {
	case claimUses:
		return "uses"
	case claimRedirected:
		return "namesOtherTarget"
	default:
		return "gone"
	}
}

// claimUseOf reads the claim named name and says whether the object named
// objectName, made for it, is still of use to it (the name carries the
// claim's UID: a claim created again under the same name is another claim).
func claimUseOf(ctx context.Context, reader client.Reader, namespace, name, objectName string) (claimUse, error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim)
	if apierrors.IsNotFound(err) {
		return claimGone, nil
	}
	if err != nil {
		return claimGone, fmt.Errorf("reading DeploymentTargetClaim %s: %w", name, err)
	}
	switch {
	case !claim.DeletionTimestamp.IsZero() || sandbox.ObjectName(claim) != objectName:
		return claimGone, nil
	case sandbox.NamesOtherTarget(claim):
		return claimRedirected, nil
	default:
		return claimUses, nil
	}
}

// checkClaim stops if the SpaceRequest's claim still exists, is not being
// deleted, is the claim the SpaceRequest was made for, and names no other
// target.
func (r *Reconciler) checkClaim(reader client.Reader) step {
	return func(ctx context.Context, s *scope) (flow.Result, error) {
		use, err := claimUseOf(ctx, reader, s.sr.Namespace, appstudiov1alpha1.ClaimOf(s.sr), s.sr.Name)
		s.claim = use
		if err == nil && use == claimUses {
			return flow.Stop(), nil
		}
		return flow.Continue(), err
	}
}

// checkTarget stops if a target was made from the SpaceRequest: then the
// target's deletion deletes it. A target that still names the gone claim and
// was never bound (made in the moment the claim went) is an orphan itself.
// A target made for a claim that lives on but now names another target is
// left alone: the claim still holds it (the binder reports the conflict, and
// the claim's deletion reclaims it); only a SpaceRequest from which no target
// was made is unused for certain.
// It asks the API server, not the cache (this is the rare deletion path):
// a target the provisioner created a moment ago must not be missed. One it
// creates after this read is a late target (reconcileLateTarget).
func (r *Reconciler) checkTarget(ctx context.Context, s *scope) (flow.Result, error) {
	dt := &appstudiov1alpha1.DeploymentTarget{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.sr), dt)
	if apierrors.IsNotFound(err) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading DeploymentTarget %s: %w", s.sr.Name, err)
	}
	if s.claim == claimGone && dt.DeletionTimestamp.IsZero() && neverBound(dt) && sandbox.ProvisionedBySandbox(dt) &&
		dt.Spec.ClaimRef != nil && dt.Spec.ClaimRef.Name == appstudiov1alpha1.ClaimOf(s.sr) {
		s.orphanTarget = dt
		return flow.Continue(), nil
	}
	return flow.Stop(), nil
}

// deleteUnusedSpaceRequest deletes a SpaceRequest from which no target was
// made, whatever the class's reclaimPolicy (see the package comment).
func (r *Reconciler) deleteUnusedSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	if s.orphanTarget != nil {
		return flow.Continue(), nil
	}
	className := appstudiov1alpha1.ClassOf(s.sr)
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphan")
	err := client.IgnoreNotFound(r.Client.Delete(spanCtx, s.sr, client.Preconditions{UID: &s.sr.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Stop(), fmt.Errorf("deleting orphaned SpaceRequest %s: %w", s.sr.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted orphaned SpaceRequest: no target was made from it", "class", className, "claimState", s.claim.String())
	what := "is gone"
	if s.claim == claimRedirected {
		what = "names another target in spec.targetName (the binder binds it to that target only)"
	}
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"Claim %s %s and no target was made from this SpaceRequest; deleted it (a reclaimPolicy keeps targets, and this SpaceRequest never backed one)",
		appstudiov1alpha1.ClaimOf(s.sr), what)
	return flow.Stop(), nil
}

// reclaimOrphanTarget applies the reclaimPolicy of the target's class to a
// target made from the SpaceRequest for the claim that is gone, never bound:
// Delete deletes it (and so the SpaceRequest); Retain, or a class that no
// longer exists, keeps both.
func (r *Reconciler) reclaimOrphanTarget(ctx context.Context, s *scope) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	dt := s.orphanTarget
	className := orphanTargetClass(dt, s.sr)
	policy := appstudiov1alpha1.ReclaimPolicyDelete
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: className}, class)
	classGone := false
	switch {
	case className == "" || apierrors.IsNotFound(err):
		policy, classGone = appstudiov1alpha1.ReclaimPolicyRetain, true
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading DeploymentTargetClass %s: %w", className, err)
	case class.Spec.ReclaimPolicy != "":
		policy = class.Spec.ReclaimPolicy
	}

	if policy != appstudiov1alpha1.ReclaimPolicyDelete {
		why := fmt.Sprintf("class %s has reclaimPolicy %s", className, policy)
		if classGone {
			why = fmt.Sprintf("class %s no longer exists (treated as reclaimPolicy Retain)", className)
		}
		log.Info("keeping a never-bound target made for a claim that is gone", "target", dt.Name, "reclaimPolicy", policy, "classGone", classGone)
		r.Recorder.Eventf(s.sr, dt, corev1.EventTypeNormal, EventOrphanRetained, "Reclaim",
			"Claim %s is gone and target %s made from this SpaceRequest was never bound; kept both because %s",
			appstudiov1alpha1.ClaimOf(s.sr), dt.Name, why)
		return flow.Continue(), nil
	}
	// Deleting the target deletes the SpaceRequest first (package target).
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindSpaceRequest, "DeleteOrphanTarget")
	err = client.IgnoreNotFound(r.Client.Delete(spanCtx, dt, client.Preconditions{UID: &dt.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("deleting orphaned DeploymentTarget %s: %w", dt.Name, err)
	}
	log.Info("deleted a target made for a claim that is gone", "target", dt.Name, "class", className)
	r.Recorder.Eventf(s.sr, dt, corev1.EventTypeNormal, EventOrphanDeleted, "Reclaim",
		"Claim %s went before target %s made from this SpaceRequest was bound; deleted the target (class %s, reclaimPolicy Delete)",
		appstudiov1alpha1.ClaimOf(s.sr), dt.Name, className)
	return flow.Continue(), nil
}

// orphanTargetClass is the class whose reclaimPolicy applies to dt, made from
// sr: the target's own class, as in the dt-binder. The SpaceRequest's class
// label records the claim's class when the SpaceRequest was made; a pending
// claim switched to another class afterwards gets a target of its new class,
// and that class's policy (say Retain) must not be overridden by the old one
// (say Delete). The label is only a fallback for a target naming no class.
func orphanTargetClass(dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) string {
	if dt.Spec.DeploymentTargetClassName != "" {
		return dt.Spec.DeploymentTargetClassName
	}
	return appstudiov1alpha1.ClassOf(sr)
}
