// Package target looks after the DeploymentTargets the sandbox-provisioner
// created: it keeps their finalizer while they live, and when one is deleted
// it deletes the target's SpaceRequest, waits until the SpaceRequest is gone
// (the SpaceRequest controller removes the namespace first), and only then
// releases the target by removing the finalizer. It never writes target
// status: the binder reports Failed when the SpaceRequest cannot terminate.
//
// A target carrying the finalizer is looked after whatever its annotations
// say now: one whose provisioned-by annotation was edited away must still be
// released when deleted. Its SpaceRequest is deleted only if it is one the
// provisioner made (labelled with its claim).
//
// A SpaceRequest deleted out of band (by anyone but this reconciler) while
// its target lives leaves the target, possibly Bound, pointing at a
// namespace that is going: a Warning Event on the target says so, once per
// deletion seen. The target is not deleted: it belongs to its claim, and its
// class's reclaimPolicy decides when the claim goes.
package target

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
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

// byKey maps a target to a value about its SpaceRequest. It is safe for
// concurrent use; the zero value is ready.
type byKey[V comparable] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]V
}

func (u *byKey[V]) set(key types.NamespacedName, v V) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[types.NamespacedName]V{}
	}
	u.m[key] = v
}

func (u *byKey[V]) get(key types.NamespacedName) (V, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[key]
	return v, ok
}

// take returns and forgets key's value.
func (u *byKey[V]) take(key types.NamespacedName) (V, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[key]
	delete(u.m, key)
	return v, ok
}

func (u *byKey[V]) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, key)
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

// spaceRequestEvents enqueues a SpaceRequest's target, and remembers a
// deletion of the SpaceRequest (its transition to being deleted, or its
// disappearance) for the target's reconcile to report if the target lives:
// the deletion is seen once, in its event, so it is reported once, and a
// reconcile without such an event costs nothing. A SpaceRequest already
// being deleted when the cache starts counts as a deletion seen (a process
// that restarts reports it again).
type spaceRequestEvents struct {
	handler.EventHandler
	deletions *byKey[types.UID]
}

func (h spaceRequestEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object.GetDeletionTimestamp() != nil {
		h.seen(e.Object)
	}
	h.EventHandler.Create(ctx, e, q)
}

func (h spaceRequestEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil {
		h.seen(e.ObjectNew)
	}
	h.EventHandler.Update(ctx, e, q)
}

func (h spaceRequestEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.seen(e.Object)
	h.EventHandler.Delete(ctx, e, q)
}

// seen records the deletion before the target is enqueued, so that the
// reconcile finds it.
func (h spaceRequestEvents) seen(o client.Object) {
	if o.GetLabels()[appstudiov1alpha1.ClaimLabel] == "" {
		return
	}
	h.deletions.set(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, o.GetUID())
}

func spaceRequestToTarget(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[appstudiov1alpha1.ClaimLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
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

// patchFinalizers writes a finalizer change, failing on a concurrent change
// so that no other writer's finalizer is lost (a conflict: the reconcile
// runs again on the newer copy, see flow.Outcomes).
func (r *Reconciler) patchFinalizers(ctx context.Context, dt *appstudiov1alpha1.DeploymentTarget, mutate func(client.Object) bool) error {
	base := dt.DeepCopy()
	if !mutate(dt) {
		return nil
	}
	return r.Client.Patch(ctx, dt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	if !sandbox.ProvisionedBySandbox(s.dt) {
		return flow.Continue(), nil // it carries the finalizer (ours); nothing to add
	}
	if err := r.patchFinalizers(ctx, s.dt, func(o client.Object) bool {
		return controllerutil.AddFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}); err != nil {
		return flow.Continue(), fmt.Errorf("adding finalizer: %w", err)
	}
	return flow.Continue(), nil
}

// checkFinalizerPresent stops when the finalizer is gone: nothing is left to release.
func (r *Reconciler) checkFinalizerPresent(_ context.Context, s *scope) (flow.Result, error) {
	if !controllerutil.ContainsFinalizer(s.dt, appstudiov1alpha1.TargetFinalizer) {
		return flow.Stop(), nil
	}
	return flow.Continue(), nil
}

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
// annotated provisioned-by names its own (its annotation, else its name, as
// it always did). A target that only carries the finalizer (its annotations
// were edited away) is released in any case, but the SpaceRequest of its
// name is deleted only if the provisioner made one (labelled with a claim):
// anything else is not the provisioner's to delete.
func deletable(dt *appstudiov1alpha1.DeploymentTarget, sr *toolchainv1alpha1.SpaceRequest) bool {
	return sandbox.ProvisionedBySandbox(dt) || sr.Labels[appstudiov1alpha1.ClaimLabel] != ""
}

// reportSpaceRequestDeletion records a Warning Event on a live target whose
// SpaceRequest was deleted by someone else: the namespace its credentials
// point to is going, and the target, possibly Bound, would otherwise say
// nothing. Only a deletion seen in a SpaceRequest event is looked at (the
// normal path costs nothing); the cache is read, and a SpaceRequest the
// cache does not show is confirmed gone with the API server. The target is
// kept: deleting it is its claim's (and its class's reclaimPolicy's) call.
func (r *Reconciler) reportSpaceRequestDeletion(ctx context.Context, s *scope) (flow.Result, error) {
	key := client.ObjectKeyFromObject(s.dt)
	uid, ok := r.deletions.take(key)
	if !ok {
		return flow.Continue(), nil
	}
	name := spaceRequestName(s.dt)
	srKey := client.ObjectKey{Namespace: s.dt.Namespace, Name: name}
	sr := &toolchainv1alpha1.SpaceRequest{}
	err := stale.Get(ctx, r.Client, r.APIReader, srKey, sr)
	switch {
	case apierrors.IsNotFound(err):
		sr = nil
	case err != nil:
		r.deletions.set(key, uid) // looked at again on the retry
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	case sr.DeletionTimestamp.IsZero():
		return flow.Continue(), nil // alive: the deletion seen was of another object
	default:
		uid = sr.UID
	}
	if sr != nil && !deletable(s.dt, sr) {
		return flow.Continue(), nil
	}
	if prev, ok := r.reported.get(key); ok && prev == uid {
		return flow.Continue(), nil // this deletion was reported already (its delete event after its update)
	}
	r.reported.set(key, uid)
	state := "is being deleted"
	if sr == nil {
		state = "is gone"
	}
	ctrl.LoggerFrom(ctx).Info("the SpaceRequest of a live target was deleted out of band; keeping the target",
		"state", state, "phase", string(s.dt.Status.Phase), "namespace", s.dt.Spec.KubernetesClusterCredentials.DefaultNamespace)
	r.Recorder.Eventf(s.dt, nil, corev1.EventTypeWarning, EventSpaceRequestDeletedOutOfBand, "Provision",
		"SpaceRequest %s %s, deleted by someone other than the provisioner while this target lives (phase %q): namespace %s its credentials point to goes with it. "+
			"The target is kept; delete its claim (or the target) to let the class's reclaimPolicy clean up",
		name, state, s.dt.Status.Phase, s.dt.Spec.KubernetesClusterCredentials.DefaultNamespace)
	return flow.Continue(), nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	spanCtx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindTarget, "RemoveFinalizer")
	err := client.IgnoreNotFound(r.patchFinalizers(spanCtx, s.dt, func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, appstudiov1alpha1.TargetFinalizer)
	}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("removing finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("released target: its SpaceRequest is gone")
	r.Recorder.Eventf(s.dt, nil, corev1.EventTypeNormal, EventDeprovisioned, "Deprovision",
		"SpaceRequest %s is gone; removed finalizer %s, so the target's deletion completes", spaceRequestName(s.dt), appstudiov1alpha1.TargetFinalizer)
	return flow.Continue(), nil
}
