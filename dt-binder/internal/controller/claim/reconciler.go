// Package claim is the dt-binder's DeploymentTargetClaim reconciler. It owns,
// on a claim: status, the dt-provisioner, bind-complete and bound-by-controller
// annotations, and the binder's finalizer; on a target: spec.claimRef when it
// binds or releases one, and the target's deletion when the class says Delete.
// A target's status is the target reconciler's (package target).
package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
	"github.com/terrace-dev/terrace/dt-binder/internal/binding"
	"github.com/terrace-dev/terrace/dt-binder/internal/observability"
	"github.com/terrace-dev/terrace/dt-binder/internal/reclaim"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/text"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// DefaultRetryInterval is how soon a claim that lost every race for a matching
// target looks again (by then the cache shows who won).
const DefaultRetryInterval = 500 * time.Millisecond

// Event reasons for actions and errors (phase transitions use the Bound
// condition's reason).
// A claimRef write is not an Event of its own (TargetClaimed was, once): it
// is a step of the binding, whose outcome the claim's Bound Event (and the
// target's) tells; the write is logged and is the ClaimTarget span.
const (
	EventDeletingTarget = "DeletingTarget"
	EventTargetRetained = "TargetRetained"
	EventClassNotFound  = "ClassNotFound"
	EventFinalized      = "Finalized"
	// EventBindFailed and EventReclaimFailed: a reconcile of a claim (or of
	// a claim being deleted) failed with an error; it is retried with back-off.
	EventBindFailed    = "BindFailed"
	EventReclaimFailed = "ReclaimFailed"
	// EventEarlierClaimTargetDeleted and EventEarlierClaimTargetReleased: a
	// target whose claimRef names the claim was bound (or provisioned) for an
	// earlier claim object of the same name, which is gone (its finalizer
	// was removed by force); its class's reclaimPolicy was applied for that
	// claim: Delete deletes it, Retain clears its claimRef.
	EventEarlierClaimTargetDeleted  = "EarlierClaimTargetDeleted"
	EventEarlierClaimTargetReleased = "EarlierClaimTargetReleased"
	// EventProvisionerChanged: a claim marked for dynamic provisioning, not
	// bound and with no target provisioned for it yet, had its class changed
	// to one of another provisioner; it was marked again for that one.
	EventProvisionerChanged = "ProvisionerChanged"
)

// BindReasonProvisionedUnderOtherClass (claim, Bound condition, phase
// Pending): a target was provisioned for the claim under the class it had
// when it was marked for provisioning, and the claim's class has been changed
// since; that target is never bound to it, and nothing is provisioned for the
// new class while it names the claim. (In this package until the API's
// constants, another module, take it.)
const BindReasonProvisionedUnderOtherClass = "ProvisionedUnderOtherClass"

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=get;list;watch
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
	// written: the claim versions the binder's own writes replaced (a
	// reconcile of such a stale cached copy is skipped).
	written stale.Versions
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

// claimsForTarget maps a target event (create, update of old and new version,
// delete) to the claims it may matter to: the claim its claimRef names, claims
// naming it in spec.targetName, and — when it is free to bind — the claims of
// its class still looking for a target.
func (r *Reconciler) claimsForTarget(ctx context.Context, o client.Object) []reconcile.Request {
	dt, ok := o.(*appstudiov1alpha1.DeploymentTarget)
	if !ok {
		return nil
	}
	seen := map[types.NamespacedName]struct{}{}
	add := func(name string) {
		seen[types.NamespacedName{Namespace: dt.Namespace, Name: name}] = struct{}{}
	}
	if dt.Spec.ClaimRef != nil && dt.Spec.ClaimRef.Name != "" {
		add(dt.Spec.ClaimRef.Name)
	}
	log := ctrl.LoggerFrom(ctx)
	var byTarget appstudiov1alpha1.DeploymentTargetClaimList
	if err := r.Client.List(ctx, &byTarget, client.InNamespace(dt.Namespace), client.MatchingFields{binding.ClaimTargetIndex: dt.Name}); err != nil {
		log.Error(err, "listing claims by target name", "target", dt.Name)
	}
	for i := range byTarget.Items {
		add(byTarget.Items[i].Name)
	}
	if binding.Unavailable(dt) == "" {
		var byClass appstudiov1alpha1.DeploymentTargetClaimList
		if err := r.Client.List(ctx, &byClass, client.InNamespace(dt.Namespace), client.MatchingFields{binding.ClaimClassIndex: dt.Spec.DeploymentTargetClassName}); err != nil {
			log.Error(err, "listing claims by class", "class", dt.Spec.DeploymentTargetClassName)
		}
		for i := range byClass.Items {
			if seeksBestMatch(&byClass.Items[i]) {
				add(byClass.Items[i].Name)
			}
		}
	}
	return toRequests(seen)
}

// claimsForClass maps a class event to every claim of the class, in every
// namespace: a class appearing unblocks claims waiting for it, and one
// disappearing changes what deletion does.
func (r *Reconciler) claimsForClass(ctx context.Context, o client.Object) []reconcile.Request {
	var claims appstudiov1alpha1.DeploymentTargetClaimList
	if err := r.Client.List(ctx, &claims, client.MatchingFields{binding.ClaimClassIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims by class", "class", o.GetName())
		return nil
	}
	seen := map[types.NamespacedName]struct{}{}
	for i := range claims.Items {
		seen[client.ObjectKeyFromObject(&claims.Items[i])] = struct{}{}
	}
	return toRequests(seen)
}

func toRequests(keys map[types.NamespacedName]struct{}) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(keys))
	for k := range keys {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// seeksBestMatch: a claim that would take any free target of its class.
func seeksBestMatch(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.DeletionTimestamp == nil && c.Spec.TargetName == "" &&
		c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] == "" &&
		!wasBound(c)
}

// boundByController: the binder, not the user, set the claim's
// spec.targetName, to the target it bound (best match, a provisioned target,
// or one pre-bound to the claim).
func boundByController(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.Annotations[appstudiov1alpha1.BoundByControllerAnnotation] == appstudiov1alpha1.AnnotationTrue
}

// wasBound: the claim has been bound before. Such a claim never looks for a
// new target; if its target goes, it is Lost (seed 004, rule B).
func wasBound(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	return c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] == appstudiov1alpha1.AnnotationTrue ||
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound ||
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseLost
}

// scope is what one reconcile knows and changes.
type scope struct {
	log    logr.Logger
	key    types.NamespacedName
	claim  *appstudiov1alpha1.DeploymentTargetClaim
	before *appstudiov1alpha1.DeploymentTargetClaim
	// class is nil when the claim's class does not exist.
	class *appstudiov1alpha1.DeploymentTargetClass
	// named are the cached targets whose claimRef names the claim (and not
	// an earlier claim object of its name).
	named []appstudiov1alpha1.DeploymentTarget
	// earlier are the cached targets whose claimRef names the claim's name
	// but records another claim UID: bound for an earlier claim object of
	// that name, which is gone (binding.ForEarlierClaim).
	earlier []appstudiov1alpha1.DeploymentTarget
	// stop ends the phase list early (the reconcile has nothing more to do).
	stop bool
	// result is merged into the reconcile result.
	result ctrl.Result
	// gone: the claim no longer exists after this reconcile's writes (its
	// finalizer was the last one).
	gone bool
	// link holds the annotations of the target the claim is bound to; its
	// trace context is linked from the reconcile span.
	link map[string]string
}

type phase func(ctx context.Context, s *scope) error

// Reconcile runs the phases for the claim and writes what they changed in one
// metadata patch and one status patch, both preconditioned on the claim's
// resourceVersion so that a reconcile working from a stale cache can never
// overwrite a newer state.
//
// The reconcile is the span "DeploymentTargetClaim.Reconcile", continuing the
// trace handed over in the claim's trace-context annotation (a new trace for a
// claim that has none yet: the binder is the first controller to act on a claim).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.forget(req.NamespacedName)
			r.written.Forget(req.NamespacedName)
			observability.Claims.Forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.written.Stale(req.NamespacedName, claim.ResourceVersion) {
		// The cache has not caught up with the binder's own last write; its
		// watch event brings the claim back.
		logf.FromContext(ctx).V(1).Info("skipping a cached claim older than the binder's last write", "resourceVersion", claim.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, observability.Tracer(), observability.KindClaim, claim, "")
	log := logf.FromContext(ctx)
	s := &scope{log: log, key: req.NamespacedName, claim: claim, before: claim.DeepCopy()}
	// persisted is the phase the claim has on the API server after this
	// reconcile, as far as the binder knows; "" when the claim is gone.
	persisted := string(claim.Status.Phase)

	defer func() {
		if retErr != nil {
			reason := EventBindFailed
			if claim.DeletionTimestamp != nil {
				reason = EventReclaimFailed
			}
			r.Recorder.Eventf(s.claim, nil, corev1EventWarning, reason, "Bind", "%v", retErr)
		}
		if s.gone {
			observability.Claims.Forget(req.Namespace, req.Name)
		} else {
			observability.Claims.Phase(req.Namespace, req.Name, persisted)
		}
		tracing.EndReconcile(span, persisted, retErr)
	}()
	defer func() {
		err := r.patch(ctx, s)
		switch {
		case err == nil:
			persisted = string(s.claim.Status.Phase)
			if s.gone {
				persisted = ""
			}
		case apierrors.IsConflict(err):
			// The claim changed under us; its newer version is on its way
			// as an event. Retry soon in any case.
			log.V(1).Info("claim changed during reconcile, retrying", "error", err.Error())
			span.AddEvent("conflict", traceReason(err))
			res = ctrl.Result{RequeueAfter: r.RetryInterval}
		default:
			retErr = errors.Join(retErr, err)
		}
	}()

	phases := []phase{r.ensureFinalizer, r.loadClass, r.loadTargets, r.reclaimEarlier, r.bind}
	if claim.DeletionTimestamp != nil {
		phases = []phase{r.requireFinalizer, r.loadClass, r.loadTargets, r.reclaimEarlier, r.reclaim}
	}
	return r.doReconcile(ctx, s, phases)
}

func (r *Reconciler) doReconcile(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	for _, p := range phases {
		if err := p(ctx, s); err != nil {
			if apierrors.IsConflict(err) {
				// A target or the claim moved on meanwhile; not an error.
				s.log.V(1).Info("conflict, retrying", "error", err.Error())
				trace.SpanFromContext(ctx).AddEvent("conflict", traceReason(err))
				return ctrl.Result{RequeueAfter: r.RetryInterval}, nil
			}
			return ctrl.Result{}, err
		}
		if s.stop {
			break
		}
	}
	return s.result, nil
}

// ensureFinalizer adds the binder's finalizer before anything else happens, so
// that a claim is never deleted without its target being dealt with. It is
// written with the reconcile's one metadata patch (with the dt-provisioner
// mark, or the bind annotations), or — should the reconcile write a target's
// claimRef — at once before that write (persistFinalizer).
func (r *Reconciler) ensureFinalizer(_ context.Context, s *scope) error {
	if !hasFinalizer(s.claim) {
		s.claim.Finalizers = append(s.claim.Finalizers, appstudiov1alpha1.ClaimFinalizer)
	}
	return nil
}

// persistFinalizer writes the finalizer ensureFinalizer added in memory, if
// the claim on the API server does not have it yet: before the binder writes
// anything elsewhere (a target's claimRef) for the claim.
func (r *Reconciler) persistFinalizer(ctx context.Context, s *scope) error {
	if hasFinalizer(s.before) || s.claim.DeletionTimestamp != nil {
		return nil
	}
	base := s.before.DeepCopy()
	s.claim.Finalizers = append(append([]string(nil), base.Finalizers...), appstudiov1alpha1.ClaimFinalizer)
	s.claim.Annotations = base.DeepCopy().Annotations
	// The binder's first write on a claim starts the claim's trace for every
	// controller that follows (no-op with tracing off).
	s.claim.Annotations = tracing.InjectOnce(ctx, s.claim.Annotations)
	desired := s.claim.Status.DeepCopy()
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "AddFinalizer")
	err := r.Client.Patch(spanCtx, s.claim, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	r.wrote(s.key, base.ResourceVersion, s.claim.ResourceVersion)
	s.claim.Status = *desired
	s.before = s.claim.DeepCopy()
	s.before.Status = base.Status
	return nil
}

// requireFinalizer stops deletion handling of claims without the binder's
// finalizer: nothing waits for the binder there.
func (r *Reconciler) requireFinalizer(_ context.Context, s *scope) error {
	if !hasFinalizer(s.claim) {
		s.stop = true
	}
	return nil
}

func (r *Reconciler) loadClass(ctx context.Context, s *scope) error {
	class, err := reclaim.GetClass(ctx, r.Client, s.claim.Spec.DeploymentTargetClassName)
	s.class = class
	return err
}

// loadTargets reads the targets naming the claim. While a claimRef write of
// this binder is not yet in the cache, it stops the reconcile: the target's
// update event will bring the claim back (see expectations).
func (r *Reconciler) loadTargets(ctx context.Context, s *scope) error {
	if x, ok := r.exp.get(s.key); ok && x.unknown {
		// The last claimRef write's outcome is unknown (a timeout): ask the
		// API server, not the cache, whether it was applied (this read is
		// made only on this rare path). Applied: wait for the cache to show
		// it, as after any write. Not applied: the target was never ours.
		live := &appstudiov1alpha1.DeploymentTarget{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.key.Namespace, Name: x.target}, live)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("confirming the claimRef write on target %s: %w", x.target, err)
		case err == nil && binding.RecordedClaimUID(live) == string(s.claim.UID):
			// The record, not the claimRef alone, tells: every claimRef
			// write carries it, and the record alone is what a write on a
			// target pre-bound to this claim adds (recordClaim).
			s.log.Info("claimRef write whose outcome was unknown was applied", "target", x.target)
			r.exp.resolve(s.key)
		default:
			s.log.Info("claimRef write whose outcome was unknown was not applied", "target", x.target)
			r.exp.forget(s.key)
		}
	}
	if x, ok := r.exp.get(s.key); ok {
		cached := &appstudiov1alpha1.DeploymentTarget{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.key.Namespace, Name: x.target}, cached)
		switch {
		case err == nil && cached.ResourceVersion == x.staleResourceVersion:
			s.log.V(1).Info("waiting for the cache to show the claimed target", "target", x.target)
			s.stop = true
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
		r.exp.forget(s.key)
	}
	named, err := binding.TargetsNamingClaim(ctx, r.Client, s.claim.Namespace, s.claim.Name)
	if err != nil {
		return err
	}
	s.named = named[:0]
	for i := range named {
		if binding.ForEarlierClaim(&named[i], s.claim) {
			s.earlier = append(s.earlier, named[i])
		} else {
			s.named = append(s.named, named[i])
		}
	}
	return nil
}

// reclaimEarlier applies, to each target bound (or provisioned) for an
// earlier claim object of this claim's name (binding.ForEarlierClaim), what
// the earlier claim's deletion would have applied had its finalizer not been
// removed by force: its class's reclaimPolicy (see reclaimPolicy). Each
// such target records the earlier claim object (that is how it is told from
// this claim's), so the earlier claim held it by a durable fact, as
// binding.ReclaimedTarget requires of a claim's own target: a target that
// only names the claim's name, recording no claim, is never among them.
// Delete deletes it; Retain clears its claimRef (the target reconciler reports it
// Released if it was bound). The claim itself then binds, or is provisioned,
// as any new claim: it never inherits that target. Rare (it takes a forced
// deletion and a claim of the same name), so its requests cost nothing on the
// normal path. The target reconciler applies the same policy (package
// reclaim) to a target whose recorded claim is gone from its cache
// (reclaimGoneClaim) and may do so for this target at the same moment; every
// write is preconditioned, so the second gets a Conflict (retried; the
// target has moved on) or finds the target already deleted (NotFound is no
// error), and the policy is applied once.
func (r *Reconciler) reclaimEarlier(ctx context.Context, s *scope) error {
	for i := range s.earlier {
		t := &s.earlier[i]
		if t.DeletionTimestamp != nil {
			continue // already going
		}
		policy, className, err := r.reclaimPolicy(ctx, s, t)
		if err != nil {
			return err
		}
		old := binding.RecordedClaimUID(t)
		if policy == appstudiov1alpha1.ReclaimPolicyRetain {
			// The API server, not the cache: a cache that has not seen the
			// SpaceRequest's deletion would release the late target to the
			// next claim (rare path: a claim object of this name is gone).
			if late, err := reclaim.LateTarget(ctx, r.APIReader, t); err != nil || late {
				if err != nil {
					return err
				}
				s.log.Info("not releasing a never-bound target of an earlier claim of this name: its SpaceRequest is going, its provisioner deletes it", "target", t.Name, "earlierClaimUID", old)
				continue
			}
			if err := r.releaseTarget(ctx, t); err != nil {
				return err
			}
			s.log.Info("released a target bound for an earlier claim of this name", "target", t.Name, "class", className, "earlierClaimUID", old)
			r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventEarlierClaimTargetReleased, "Reclaim",
				"Target %s was bound to an earlier claim %s (UID %s), which is gone; released it for that claim (class %s, reclaimPolicy Retain). This claim does not inherit it",
				t.Name, s.claim.Name, old, className)
			continue
		}
		if err := r.deleteTarget(ctx, t); err != nil {
			return err
		}
		s.log.Info("deleting a target bound for an earlier claim of this name", "target", t.Name, "class", className, "earlierClaimUID", old)
		r.Recorder.Eventf(s.claim, t, corev1EventNormal, EventEarlierClaimTargetDeleted, "Reclaim",
			"Target %s was bound to an earlier claim %s (UID %s), which is gone; deleting it for that claim (class %s, reclaimPolicy Delete). This claim does not inherit it",
			t.Name, s.claim.Name, old, className)
	}
	return nil
}

// reclaimPolicy is the reclaim policy of target t: that of t's class, the
// class it was bound under (after a class change of the claim, the claim's
// new class says nothing about a target it never provisioned). A class that
// does not exist counts as Retain (reclaim.Policy), with a warning Event.
func (r *Reconciler) reclaimPolicy(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) (appstudiov1alpha1.ReclaimPolicy, string, error) {
	className := t.Spec.DeploymentTargetClassName
	class := s.class
	if className != s.claim.Spec.DeploymentTargetClassName {
		var err error
		if class, err = reclaim.GetClass(ctx, r.Client, className); err != nil {
			return "", className, err
		}
	}
	if class == nil {
		r.Recorder.Eventf(s.claim, t, corev1EventWarning, EventClassNotFound, "Reclaim",
			"DeploymentTargetClass %q of target %s does not exist; retaining the target", className, t.Name)
	}
	return reclaim.Policy(class), className, nil
}

// releaseTarget clears t's claimRef (reclaim.Release).
func (r *Reconciler) releaseTarget(ctx context.Context, t *appstudiov1alpha1.DeploymentTarget) error {
	_, err := reclaim.Release(ctx, r.Client, observability.KindClaim, t)
	return err
}

// deleteTarget deletes t, preconditioned on its UID (reclaim.Delete).
func (r *Reconciler) deleteTarget(ctx context.Context, t *appstudiov1alpha1.DeploymentTarget) error {
	return reclaim.Delete(ctx, r.Client, observability.KindClaim, t)
}

// bind decides the claim's binding (seed 004 steps 3, 7, 8 and the binder
// flowchart): static by spec.targetName, a target already naming the claim,
// Lost, best match, or dynamic provisioning.
func (r *Reconciler) bind(ctx context.Context, s *scope) error {
	c := s.claim
	if t := binding.HeldTarget(c, s.named); t != nil && t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName {
		// spec.deploymentTargetClassName was changed after the claim bound
		// t. Like a bound PersistentVolumeClaim, the claim keeps its target
		// (binding another would leave t claimed for ever, and whoever uses
		// the claim would lose its environment); it stays Bound, reason
		// ClassChanged (see bound), and t's class decides the reclaim.
		r.follow(s, t)
		return nil
	}
	if c.Spec.TargetName != "" {
		return r.bindStatic(ctx, s)
	}
	if t := binding.BoundTarget(c, s.named); t != nil {
		if wrote, err := r.recordClaim(ctx, s, t); wrote || err != nil {
			return err
		}
		r.follow(s, t)
		return nil
	}
	if wasBound(c) {
		s.lost("its target is gone")
		return nil
	}
	if reason, why := whyNotEligible(c, s.named); why != "" {
		s.pending(reason, why)
		return nil
	}
	if s.class == nil {
		s.pending(appstudiov1alpha1.BindReasonClassNotFound,
			fmt.Sprintf("DeploymentTargetClass %q does not exist", c.Spec.DeploymentTargetClassName))
		return nil
	}
	if p := c.Annotations[appstudiov1alpha1.ProvisionerAnnotation]; p != "" {
		if want := s.class.Spec.Provisioner; p != want {
			// Marked under the class the claim had before (the mark is
			// written once); the provisioner acts on the mark alone, so a
			// stale one has the wrong provisioner provision, or none ever.
			// Unbound, with no target provisioned for it (one naming it
			// would have been followed, or refused by whyNotEligible,
			// above): mark it for the current class's provisioner, in this
			// reconcile's one metadata write.
			c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] = want
			s.log.Info("class changed while waiting for provisioning; marked for the new class's provisioner", "was", p, "provisioner", want)
			r.Recorder.Eventf(c, nil, corev1EventNormal, EventProvisionerChanged, "Bind",
				"spec.deploymentTargetClassName is now %q, whose provisioner is %s; marked the claim for provisioning by %s instead of %s",
				c.Spec.DeploymentTargetClassName, want, want, p)
			p = want
		}
		// Once marked, the claim waits for its provisioner only: binding it to
		// another free target now would orphan what the provisioner creates.
		s.pending(appstudiov1alpha1.BindReasonProvisioning, provisioningMessage(c, p, s.named))
		return nil
	}
	return r.bindBestMatch(ctx, s)
}

// provisioningMessage is the Bound condition's message while a claim waits
// for its provisioner: the same when the claim is marked and on every
// reconcile after, so the wait costs one status write.
func provisioningMessage(c *appstudiov1alpha1.DeploymentTargetClaim, provisioner string, named []appstudiov1alpha1.DeploymentTarget) string {
	return fmt.Sprintf("no free target of class %s; waiting for provisioner %s to create one", c.Spec.DeploymentTargetClassName, provisioner) +
		releasedNote(named)
}

// whyNotEligible explains why a target that names the claim is not bound to
// it (another class: a user pre-bound it by mistake, and the claim waits for
// the user to fix one or the other); empty when no such target names the
// claim. A Released target naming the claim does not count: it was let go by
// an earlier claim of the same name and is never bound again automatically,
// so waiting for it would leave the claim Pending for ever; the claim binds
// as if it were not there (best match, or dynamic provisioning), and its
// message says so (releasedNote).
func whyNotEligible(c *appstudiov1alpha1.DeploymentTargetClaim, named []appstudiov1alpha1.DeploymentTarget) (reason, message string) {
	for i := range named {
		t := &named[i]
		if released(t) {
			continue
		}
		if t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName {
			if p := c.Annotations[appstudiov1alpha1.ProvisionerAnnotation]; p != "" &&
				t.Annotations[appstudiov1alpha1.ProvisionedByAnnotation] != "" && binding.RecordedClaimUID(t) == string(c.UID) {
				// Provisioned for this claim, under the class it had when it
				// was marked: the class was changed after that.
				return BindReasonProvisionedUnderOtherClass, fmt.Sprintf(
					"target %s was provisioned for this claim (by %s) under class %q, and spec.deploymentTargetClassName was changed to %q since: "+
						"it is never bound to this claim, and nothing is provisioned for class %q while it names this claim. "+
						"Set the class back to %q, or delete target %s (the claim is then marked for class %q's provisioner), or delete the claim",
					t.Name, p, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName,
					c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName, t.Name, c.Spec.DeploymentTargetClassName)
			}
			return appstudiov1alpha1.BindReasonClassMismatch, fmt.Sprintf("target %s names this claim but is of class %q, not %q; it is never bound",
				t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName)
		}
	}
	return "", ""
}

// releasedNote tells, in a Pending claim's message, that a Released target
// still names the claim and was passed over; "" when none does.
func releasedNote(named []appstudiov1alpha1.DeploymentTarget) string {
	for i := range named {
		if released(&named[i]) {
			return fmt.Sprintf(" (target %s names this claim but was Released by an earlier claim of this name; a Released target is not bound again until an operator sets its phase to Available)", named[i].Name)
		}
	}
	return ""
}

func released(t *appstudiov1alpha1.DeploymentTarget) bool {
	return t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseReleased
}

// follow reports the state of the target bound (or being bound) to the claim.
// The claim turns Bound only after the target reports Bound (steps 7 then 8).
func (r *Reconciler) follow(s *scope, t *appstudiov1alpha1.DeploymentTarget) {
	switch {
	case t.DeletionTimestamp != nil && wasBound(s.claim):
		s.lost(fmt.Sprintf("target %s is being deleted", t.Name))
	case t.DeletionTimestamp != nil:
		s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable, fmt.Sprintf("target %s is being deleted", t.Name))
	case t.Status.Phase == appstudiov1alpha1.DeploymentTargetPhaseBound:
		s.bound(t)
		s.link = t.Annotations
	case provisioning(s.claim):
		// The provisioned target has appeared but not reported Bound yet:
		// the claim stays Pending, Provisioning until it turns Bound (no
		// status write for the moment in between).
	default:
		s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
			fmt.Sprintf("target %s names this claim; waiting for it to report Bound", t.Name))
	}
}

// provisioning: the claim is Pending for dynamic provisioning (marked, and
// its Bound condition says Provisioning).
func provisioning(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, appstudiov1alpha1.ConditionBound)
	return c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] != "" &&
		c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhasePending &&
		cond != nil && cond.Reason == appstudiov1alpha1.BindReasonProvisioning &&
		cond.ObservedGeneration == c.Generation
}

// bindStatic binds to the target the user named in spec.targetName, and to no
// other: a target of another class or claimed by another claim is refused.
// A claim that has bound before and holds nothing now is Lost; it claims the
// named target only if the user, not the binder, set spec.targetName.
func (r *Reconciler) bindStatic(ctx context.Context, s *scope) error {
	c := s.claim
	name := c.Spec.TargetName
	if held := binding.HeldTarget(c, s.named); held != nil && held.Name != name && binding.BindComplete(c) {
		// spec.targetName was changed after the claim bound another
		// target. Checked before anything about the named target (missing,
		// of another class, claimed by another claim): those say nothing
		// about this claim, which keeps what it holds. Claiming the named
		// target too would bind two targets to one claim (and leave the
		// first claimed for ever); its reclaim policy applies when the
		// claim goes.
		r.targetNameConflict(s, held, name)
		return nil
	}
	t := &appstudiov1alpha1.DeploymentTarget{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, t); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting target %s: %w", name, err)
		}
		if wasBound(c) {
			s.lost(fmt.Sprintf("target %s was deleted", name))
		} else {
			s.pending(appstudiov1alpha1.BindReasonTargetNotFound, fmt.Sprintf("target %s does not exist", name))
		}
		return nil
	}
	if wasBound(c) && boundByController(c) && !binding.NamesClaim(t, c) {
		// The binder wrote spec.targetName: it names the target the claim
		// bound, which has gone (or let go of it), and this is another
		// target, or the same one freed, that happens to have its name. A
		// claim whose target is gone never looks for another (rule B):
		// taking this one would bind the claim, quietly, to whatever was
		// created under the old name. A name the user set is the user's
		// choice, and binds the target of that name that exists now.
		s.lost(fmt.Sprintf("target %s, which this claim was bound to, is gone or no longer names it; a claim whose target is gone does not bind another, "+
			"even one of the same name (spec.targetName was set by the binder): create a new claim", name))
		return nil
	}
	switch {
	case t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName:
		s.pending(appstudiov1alpha1.BindReasonClassMismatch,
			fmt.Sprintf("target %s is of class %q, not %q; it is never bound", name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName))
		return nil
	case binding.ForEarlierClaim(t, c):
		// Bound for an earlier claim of this name, which is gone;
		// reclaimEarlier applied its class's reclaimPolicy in this
		// reconcile, and the target's next event brings the claim back.
		s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable,
			fmt.Sprintf("target %s was bound to an earlier claim of this name (UID %s), which is gone; its class's reclaimPolicy is applied for that claim, and this claim does not inherit it",
				name, binding.RecordedClaimUID(t)))
		return nil
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == c.Name && released(t):
		// Left Released, still naming this claim's name, by an earlier claim
		// (its finalizer was removed by force): this claim did not bind it,
		// and a Released target is never bound again automatically.
		if wasBound(c) {
			s.lost(fmt.Sprintf("target %s was released", name))
		} else {
			s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable,
				fmt.Sprintf("target %s names this claim but was Released by an earlier claim of this name; it is not bound again until an operator sets its phase to Available", name))
		}
		return nil
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name == c.Name:
		if wrote, err := r.recordClaim(ctx, s, t); wrote || err != nil {
			return err
		}
		r.follow(s, t)
		return nil
	case t.Spec.ClaimRef != nil && t.Spec.ClaimRef.Name != "":
		s.pending(appstudiov1alpha1.BindReasonTargetClaimedByOther,
			fmt.Sprintf("target %s is claimed by %q; it is never bound", name, t.Spec.ClaimRef.Name))
		return nil
	}
	if held := binding.HeldTarget(c, s.named); held != nil && held.Name != name {
		// Not bound yet, but another target of its class names the claim
		// (pre-bound, or being bound): claiming this one too would bind
		// two targets to one claim.
		r.targetNameConflict(s, held, name)
		return nil
	}
	if why := binding.Unavailable(t); why != "" {
		if wasBound(c) {
			s.lost(fmt.Sprintf("target %s was released: %s", name, why))
		} else {
			s.pending(appstudiov1alpha1.BindReasonTargetNotAvailable, fmt.Sprintf("target %s cannot be bound: %s", name, why))
		}
		return nil
	}
	if err := r.claimTarget(ctx, s, t); err != nil {
		return err
	}
	s.pending(appstudiov1alpha1.BindReasonWaitingForTarget, fmt.Sprintf("claimed target %s; waiting for it to report Bound", name))
	return nil
}

// targetNameConflict reports a claim whose spec.targetName names another
// target than held, the one it holds. A bound claim stays Bound (as after a
// class change: whoever uses it keeps its environment), its Bound condition
// True with reason TargetNameConflict (a Warning Event); a claim not bound
// yet stays Pending with that reason.
//
// Deleting the claim applies held's reclaimPolicy only if the claim holds it
// by a durable fact (binding.HeldByFact); a target that only names the claim
// (pre-bound by a user) is left as it is, and the message says which.
func (r *Reconciler) targetNameConflict(s *scope, held *appstudiov1alpha1.DeploymentTarget, name string) {
	msg := fmt.Sprintf("spec.targetName is %s, but target %s is bound to this claim; a claim binds one target, so target %s is not bound: "+
		"set spec.targetName back to %s, or delete the claim (target %s's reclaimPolicy applies) and create one for %s",
		name, held.Name, name, held.Name, held.Name, name)
	if !binding.HeldByFact(s.claim, held) {
		msg = fmt.Sprintf("spec.targetName is %s, but target %s names this claim in its spec.claimRef; a claim binds one target, so neither is bound: "+
			"set spec.targetName to %s, or clear target %s's spec.claimRef, or delete the claim (target %s, which this claim never bound, is left as it is, still naming it)",
			name, held.Name, held.Name, held.Name, held.Name)
	}
	if !binding.BindComplete(s.claim) {
		s.pending(appstudiov1alpha1.BindReasonTargetNameConflict, msg)
		return
	}
	r.follow(s, held)
	if s.claim.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonTargetNameConflict, msg)
	}
}

// bindBestMatch claims the best free target of the claim's class (oldest
// first, then by name), or marks the claim for dynamic provisioning when none
// is free. Racing claims are serialised by the API server: each claimRef write
// is preconditioned on the target's resourceVersion, so of two claims that saw
// the same free target exactly one wins; the other moves on to the next.
func (r *Reconciler) bindBestMatch(ctx context.Context, s *scope) error {
	c := s.claim
	var targets appstudiov1alpha1.DeploymentTargetList
	if err := r.Client.List(ctx, &targets, client.InNamespace(c.Namespace),
		client.MatchingFields{binding.TargetClassIndex: c.Spec.DeploymentTargetClassName}); err != nil {
		return fmt.Errorf("listing targets of class %s: %w", c.Spec.DeploymentTargetClassName, err)
	}
	candidates := binding.Candidates(c, targets.Items)
	if len(candidates) == 0 {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] = s.class.Spec.Provisioner
		s.pending(appstudiov1alpha1.BindReasonProvisioning, provisioningMessage(c, s.class.Spec.Provisioner, s.named))
		return nil
	}
	for _, t := range candidates {
		err := r.claimTarget(ctx, s, t)
		if err == nil {
			s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
				fmt.Sprintf("claimed target %s (best match); waiting for it to report Bound", t.Name)+releasedNote(s.named))
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		s.log.V(1).Info("target taken meanwhile, trying the next", "target", t.Name)
	}
	s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
		fmt.Sprintf("all %d free targets of class %s were claimed by other claims meanwhile; retrying", len(candidates), c.Spec.DeploymentTargetClassName))
	s.result.RequeueAfter = r.RetryInterval
	return nil
}

// claimTarget writes the claim into the target's spec.claimRef, preconditioned
// on the resourceVersion the decision was made on.
// A target another reconcile of this binder is claiming right now counts as
// a conflict (see expectations).
func (r *Reconciler) claimTarget(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) error {
	return r.writeClaimRef(ctx, s, t, tracing.Inject)
}

// writeClaimRef is claimTarget's write; inject puts the trace context of
// the ClaimTarget span into the target's annotations (tracing.Inject, or
// tracing.InjectOnce to keep a context the target has: recordClaim's, on a
// target whose creator handed a trace over already).
func (r *Reconciler) writeClaimRef(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget,
	inject func(context.Context, map[string]string) map[string]string) (err error) {
	// A claim is never deleted without its target being dealt with: its
	// finalizer is on the API server before any target names it.
	if err := r.persistFinalizer(ctx, s); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(t)
	if !r.exp.reserve(key, t.ResourceVersion) {
		return apierrors.NewConflict(appstudiov1alpha1.SchemeGroupVersion.WithResource("deploymenttargets").GroupResource(),
			t.Name, errors.New("being claimed by another claim"))
	}
	ctx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "ClaimTarget", attribute.String("terrace.target", t.Name))
	defer func() { tracing.EndStep(span, err) }()
	patched := t.DeepCopy()
	patched.Spec.ClaimRef = &appstudiov1alpha1.DeploymentTargetClaimReference{Name: s.claim.Name}
	// The claim object, not only its name, in the same write: a claim
	// created later under this name does not inherit the target.
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[appstudiov1alpha1.ClaimAnnotation] = appstudiov1alpha1.ClaimRecord(s.claim)
	// The claim's job goes on with the target (whose reconcile reports it
	// Bound): hand the trace over in the same write (no-op with tracing off).
	patched.Annotations = inject(ctx, patched.Annotations)
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(t, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Not applied: the target moved on, or is gone.
			r.exp.done(s.key, key, "")
		} else {
			// A timeout or a lost response: the write may have been
			// applied. Moving on to another target from a cache that still
			// shows this one free could bind two; the next reconcile asks
			// the API server first (loadTargets).
			r.exp.unknown(s.key, key, t.ResourceVersion)
			s.log.Info("outcome of a claimRef write unknown; the next reconcile confirms it with the API server", "target", t.Name, "error", err.Error())
		}
		return fmt.Errorf("claiming target %s: %w", t.Name, err)
	}
	r.exp.done(s.key, key, t.ResourceVersion)
	// No Event: the claim's Bound Event, once the target reports Bound, is
	// the one that says what happened (this write is logged, and traced).
	s.log.Info("claimed target", "target", t.Name)
	return nil
}

// recordClaim gives a target that names the claim by name only, without the
// claim record (a target a user pre-bound to the claim, before or after the
// claim was created; or one an older provisioner made without the record),
// the record of this claim object, when the claim binds it: as the
// PersistentVolume controller sets a pre-bound volume's claimRef.uid when it
// binds it. From then on the target is this claim object's only, as any
// target the binder bound: a claim of the same name created after this one
// went by force does not inherit it (reclaimEarlier), and the reclaimPolicy
// of its class applies when this claim goes without its finalizer running
// (the target reconciler's reclaimGoneClaim). Without the record both would
// take the target for the new claim's, or leave it Released for ever.
//
// Only while the claim binds (no bind-complete yet): a bind-complete claim
// whose target lacks the record was bound before the record existed, and is
// left as it was. The write is claimTarget's (the claimRef already names the
// claim; the write adds the record and the trace context, preconditioned on
// the target's resourceVersion), so the claim then waits for the cache to
// show it, as after any claimRef write, and turns Bound on a later
// reconcile. It reports whether it wrote (or the target went meanwhile):
// the reconcile then has nothing more to decide. Rare: pre-bound targets
// only; a provisioned target carries the record from its create.
func (r *Reconciler) recordClaim(ctx context.Context, s *scope, t *appstudiov1alpha1.DeploymentTarget) (bool, error) {
	if binding.BindComplete(s.claim) || binding.RecordedClaimUID(t) != "" || t.DeletionTimestamp != nil || released(t) ||
		t.Spec.DeploymentTargetClassName != s.claim.Spec.DeploymentTargetClassName {
		return false, nil
	}
	// A trace context the target has (its provisioner's) is kept.
	if err := r.writeClaimRef(ctx, s, t, tracing.InjectOnce); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // gone: its delete event brings the claim back
		}
		return true, err
	}
	s.log.Info("recorded the claim on the target pre-bound to it", "target", t.Name)
	if !provisioning(s.claim) {
		s.pending(appstudiov1alpha1.BindReasonWaitingForTarget,
			fmt.Sprintf("target %s names this claim; recorded this claim on it, waiting for it to report Bound", t.Name))
	}
	return true, nil
}

// reclaim is the claim side of deletion (seed 004 steps 1, 2, 7 and rule C):
// with reclaimPolicy Delete the bound target is deleted and the finalizer goes
// once it is gone; with Retain the target's claimRef is cleared (the target
// reports Released) and the finalizer goes at once. The policy is that of
// the target's class, the class it was bound under: after a class change of
// the claim (ClassChanged) the claim's new class says nothing about a target
// it never provisioned. A target whose class is missing is kept (Retain):
// deleting what no policy asked to delete is the one mistake that cannot be
// undone; the claim still goes.
//
// The policy applies only to a target the claim holds by a durable fact
// (binding.ReclaimedTarget: it records this claim object, or the claim is
// bind-complete). A target that only names the claim (a user pre-bound it,
// and the claim named another in spec.targetName, or was deleted before it
// bound it) is left as it is, reserved for the claim's name, as a pre-bound
// PersistentVolume whose claimRef has no UID is never reclaimed.
func (r *Reconciler) reclaim(ctx context.Context, s *scope) error {
	c := s.claim
	t := binding.ReclaimedTarget(c, s.named)
	if t == nil {
		if named := binding.HeldTarget(c, s.named); named != nil {
			s.log.Info("leaving a target that names the claim but was never bound by it", "target", named.Name)
			r.removeFinalizer(s, fmt.Sprintf("target %s names this claim but was never bound by it; it is left as it is", named.Name))
			return nil
		}
		r.removeFinalizer(s, "no target is bound")
		return nil
	}
	policy, className, err := r.reclaimPolicy(ctx, s, t)
	if err != nil {
		return err
	}

	if policy == appstudiov1alpha1.ReclaimPolicyRetain {
		// The API server, not the cache (see reclaimEarlier); only on the
		// deletion of a claim under Retain.
		late, err := reclaim.LateTarget(ctx, r.APIReader, t)
		if err != nil {
			return err
		}
		if late {
			// Not offered to the next claim: its namespace is going.
			s.log.Info("not releasing a never-bound target whose SpaceRequest is going; its provisioner deletes it", "target", t.Name)
			r.removeFinalizer(s, fmt.Sprintf("target %s was never bound and its SpaceRequest is being deleted; its provisioner deletes it", t.Name))
			return nil
		}
		if t.Spec.ClaimRef != nil && t.DeletionTimestamp == nil {
			if err := r.releaseTarget(ctx, t); err != nil {
				return err
			}
			s.log.Info("released target (reclaimPolicy Retain)", "target", t.Name, "class", className)
			r.Recorder.Eventf(c, t, corev1EventNormal, EventTargetRetained, "Reclaim",
				"Released target %s and kept it (class %s, reclaimPolicy Retain)", t.Name, className)
		}
		r.removeFinalizer(s, "target retained")
		return nil
	}

	if t.DeletionTimestamp == nil {
		if err := r.deleteTarget(ctx, t); err != nil {
			return err
		}
		s.log.Info("deleting target (reclaimPolicy Delete)", "target", t.Name, "class", className)
		r.Recorder.Eventf(c, t, corev1EventNormal, EventDeletingTarget, "Reclaim",
			"Deleting target %s (class %s, reclaimPolicy Delete)", t.Name, className)
	}
	// Step 7: the finalizer goes when the target is gone; its delete event
	// brings the claim back.
	s.setCondition(metav1.ConditionFalse, appstudiov1alpha1.BindReasonDeletingTarget, deletingTargetMessage(t))
	return nil
}

// maxQuotedTargetMessage bounds what deletingTargetMessage quotes of a
// failed target's Ready message, which quotes its SpaceRequest's in turn.
const maxQuotedTargetMessage = 1024

// deletingTargetMessage says what a deleted claim waits for: its target to
// go. A target Failed while being deleted (its SpaceRequest could not be
// terminated) goes only once that is dealt with, so the message says so,
// why (the target's Ready condition, from the cached copy: no request), and
// where to look further.
func deletingTargetMessage(t *appstudiov1alpha1.DeploymentTarget) string {
	msg := fmt.Sprintf("waiting for target %s to be deleted (reclaimPolicy Delete)", t.Name)
	if t.Status.Phase != appstudiov1alpha1.DeploymentTargetPhaseFailed {
		return msg
	}
	msg += fmt.Sprintf("; the target's phase is %s", t.Status.Phase)
	if c := meta.FindStatusCondition(t.Status.Conditions, appstudiov1alpha1.TargetConditionReady); c != nil && c.Message != "" {
		msg += fmt.Sprintf(" (%s: %s)", c.Reason, text.Shorten(c.Message, maxQuotedTargetMessage))
	}
	return msg + fmt.Sprintf("; see its status and events: kubectl describe deploymenttarget %s -n %s", t.Name, t.Namespace)
}

func (r *Reconciler) removeFinalizer(s *scope, why string) {
	s.claim.Finalizers = removeString(s.claim.Finalizers, appstudiov1alpha1.ClaimFinalizer)
	s.log.Info("removing finalizer", "why", why)
	r.Recorder.Eventf(s.claim, nil, corev1EventNormal, EventFinalized, "Reclaim", "Removed finalizer: %s", why)
}

// patch writes metadata (annotations, finalizers; spec.targetName once bound)
// and then status, each only if changed, each preconditioned on the
// resourceVersion, and emits an Event when the Bound condition changed its
// reason. A metadata write also carries
// the claim's trace context if the claim has none yet (never a write of its
// own). When the claim turns Bound it observes the bind latency, once: the
// status write succeeds only from the state the reconcile read, which was not
// Bound.
func (r *Reconciler) patch(ctx context.Context, s *scope) error {
	desired := s.claim.Status.DeepCopy()
	statusBase := s.claim.DeepCopy()
	statusBase.Status = *s.before.Status.DeepCopy()
	if !equality.Semantic.DeepEqual(s.before.Annotations, s.claim.Annotations) ||
		!equality.Semantic.DeepEqual(s.before.Finalizers, s.claim.Finalizers) ||
		s.before.Spec.TargetName != s.claim.Spec.TargetName {
		obj := s.claim.DeepCopy()
		obj.Status = s.before.Status
		if obj.DeletionTimestamp == nil {
			obj.Annotations = tracing.InjectOnce(ctx, obj.Annotations)
		}
		spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "PatchMetadata")
		err := r.Client.Patch(spanCtx, obj, client.MergeFromWithOptions(s.before, client.MergeFromWithOptimisticLock{}))
		if err != nil && !apierrors.IsNotFound(err) {
			tracing.EndStep(span, err)
			return fmt.Errorf("patching claim metadata: %w", err)
		}
		tracing.EndStep(span, nil)
		if apierrors.IsNotFound(err) || (obj.DeletionTimestamp != nil && !hasFinalizer(obj)) {
			s.gone = true
			return nil // deleted by now: no status to write
		}
		r.wrote(s.key, s.before.ResourceVersion, obj.ResourceVersion)
		if p := obj.Annotations[appstudiov1alpha1.ProvisionerAnnotation]; p != "" && s.before.Annotations[appstudiov1alpha1.ProvisionerAnnotation] == "" {
			// No Event of its own: the claim's Bound event (and the trace)
			// tell the outcome.
			s.log.Info("requested dynamic provisioning", "provisioner", p)
		}
		s.claim = obj
		statusBase = obj.DeepCopy()
		observeOwnSpecChange(desired, s.before.Generation, obj.Generation)
	}
	if equality.Semantic.DeepEqual(statusBase.Status, *desired) {
		return nil
	}
	s.claim.Status = *desired
	spanCtx, span := tracing.StartStep(ctx, observability.Tracer(), observability.KindClaim, "PatchStatus",
		tracing.AttrPhase.String(string(desired.Phase)))
	err := r.Client.Status().Patch(spanCtx, s.claim, client.MergeFromWithOptions(statusBase, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		tracing.EndStep(span, err)
		return fmt.Errorf("patching claim status: %w", err)
	}
	tracing.EndStep(span, nil)
	if apierrors.IsNotFound(err) {
		s.gone = true
		return nil
	}
	r.wrote(s.key, statusBase.ResourceVersion, s.claim.ResourceVersion)
	if statusBase.Status.Phase != appstudiov1alpha1.DeploymentTargetClaimPhaseBound &&
		s.claim.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound {
		observability.ObserveBind(bindMode(s.claim), s.claim.CreationTimestamp.Time)
		// The claim's trace links to the trace of the target it is bound to.
		observability.LinkTo(ctx, s.link)
	}
	r.emitTransition(s)
	return nil
}

// observeOwnSpecChange moves the status computed for generation from to
// generation to, when the metadata patch that took the claim there was this
// reconcile's own (spec.targetName of a claim it bound; the patch is guarded
// by the resourceVersion read, so no other spec change came with it): the
// status describes exactly that spec.
func observeOwnSpecChange(st *appstudiov1alpha1.DeploymentTargetClaimStatus, from, to int64) {
	if from == to || st.ObservedGeneration != from {
		return
	}
	st.ObservedGeneration = to
	for i := range st.Conditions {
		if st.Conditions[i].ObservedGeneration == from {
			st.Conditions[i].ObservedGeneration = to
		}
	}
}

// wrote records that a write of the binder replaced the claim's version
// old (a write that changed nothing keeps the version and records nothing).
func (r *Reconciler) wrote(key types.NamespacedName, old, now string) {
	if old != now {
		r.written.Replaced(key, old)
	}
}

// bindMode is the mode label of the bind latency: dynamic for claims marked
// for dynamic provisioning, static otherwise.
func bindMode(c *appstudiov1alpha1.DeploymentTargetClaim) string {
	if c.Annotations[appstudiov1alpha1.ProvisionerAnnotation] != "" {
		return observability.ModeDynamic
	}
	return observability.ModeStatic
}

func traceReason(err error) trace.EventOption {
	return trace.WithAttributes(attribute.String("error", err.Error()))
}

func (r *Reconciler) emitTransition(s *scope) {
	now := meta.FindStatusCondition(s.claim.Status.Conditions, appstudiov1alpha1.ConditionBound)
	if now == nil {
		return
	}
	if old := meta.FindStatusCondition(s.before.Status.Conditions, appstudiov1alpha1.ConditionBound); old != nil && old.Reason == now.Reason {
		return
	}
	eventType := corev1EventNormal
	switch now.Reason {
	case appstudiov1alpha1.BindReasonProvisioning, appstudiov1alpha1.BindReasonWaitingForTarget:
		// Not outcomes: the claim's Bound event (and the trace) cover them.
		s.log.Info("claim binding changed", "phase", s.claim.Status.Phase, "reason", now.Reason, "message", now.Message)
		return
	case appstudiov1alpha1.BindReasonBound, appstudiov1alpha1.BindReasonDeletingTarget:
	default:
		eventType = corev1EventWarning
	}
	s.log.Info("claim binding changed", "phase", s.claim.Status.Phase, "reason", now.Reason, "message", now.Message)
	r.Recorder.Eventf(s.claim, nil, eventType, now.Reason, "Bind", "%s", now.Message)
}

// Status helpers. Every write sets observedGeneration, so a reader knows the
// status answers the claim's current spec.

func (s *scope) setCondition(status metav1.ConditionStatus, reason, message string) {
	s.claim.Status.ObservedGeneration = s.claim.Generation
	meta.SetStatusCondition(&s.claim.Status.Conditions, metav1.Condition{
		Type:               appstudiov1alpha1.ConditionBound,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.claim.Generation,
	})
}

func (s *scope) pending(reason, message string) {
	s.claim.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhasePending
	s.setCondition(metav1.ConditionFalse, reason, message)
}

func (s *scope) lost(message string) {
	s.claim.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhaseLost
	s.setCondition(metav1.ConditionFalse, appstudiov1alpha1.BindReasonTargetLost, message)
}

func (s *scope) bound(t *appstudiov1alpha1.DeploymentTarget) {
	c := s.claim
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] = appstudiov1alpha1.AnnotationTrue
	if c.Spec.TargetName == "" {
		// The binder, not the user, found the target (best match, a
		// provisioned target, or a target pre-bound by claimRef). Like a
		// PersistentVolumeClaim's volumeName, spec.targetName then names it
		// (kubectl get's TARGET column), written with the annotations.
		c.Annotations[appstudiov1alpha1.BoundByControllerAnnotation] = appstudiov1alpha1.AnnotationTrue
		c.Spec.TargetName = t.Name
	}
	c.Status.Phase = appstudiov1alpha1.DeploymentTargetClaimPhaseBound
	if t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName && c.Spec.TargetName != t.Name {
		// Both the class and spec.targetName were changed after binding. The
		// class change decides, as alone (the claim keeps t), but the
		// targetName change must not go unnoticed: the reason and its
		// Warning Event name both.
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonClassAndTargetNameChanged,
			fmt.Sprintf("bound to target %s of class %q; both spec.deploymentTargetClassName (now %q) and spec.targetName (now %s) were changed after binding: "+
				"a bound claim keeps its target, so neither change takes effect (target %s is not bound, nothing is provisioned for class %q), "+
				"and class %q's reclaimPolicy applies when the claim is deleted. Set both back, or create a new claim",
				t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName, c.Spec.TargetName,
				c.Spec.TargetName, c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName))
		return
	}
	if t.Spec.DeploymentTargetClassName != c.Spec.DeploymentTargetClassName {
		// Still bound (whoever uses the claim keeps its target), but the
		// spec no longer describes the binding: a Warning condition reason
		// says so until the class is set back or the claim is replaced.
		s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonClassChanged,
			fmt.Sprintf("bound to target %s of class %q; spec.deploymentTargetClassName was changed to %q after binding: a bound claim keeps its target, "+
				"and class %q's reclaimPolicy applies when the claim is deleted. Set the class back, or create a new claim for class %q",
				t.Name, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName, t.Spec.DeploymentTargetClassName, c.Spec.DeploymentTargetClassName))
		return
	}
	s.setCondition(metav1.ConditionTrue, appstudiov1alpha1.BindReasonBound, fmt.Sprintf("bound to target %s", t.Name))
}

func hasFinalizer(c *appstudiov1alpha1.DeploymentTargetClaim) bool {
	for _, f := range c.Finalizers {
		if f == appstudiov1alpha1.ClaimFinalizer {
			return true
		}
	}
	return false
}

func removeString(in []string, s string) []string {
	out := in[:0:0]
	for _, v := range in {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// Event types (corev1.EventTypeNormal/Warning), spelled out to keep k8s.io/api
// out of this package's imports.
const (
	corev1EventNormal  = "Normal"
	corev1EventWarning = "Warning"
)
