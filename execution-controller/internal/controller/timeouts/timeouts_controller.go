package timeouts

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
)

// Least privilege for this reconciler (collected into the binary's ClusterRole by make generate-rbac).
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "deployitem-timeouts"

// Event reasons (filterable with kubectl get events --field-selector reason=...).
const (
	EventPickupTimeout      = lsv1alpha1.ReasonPickupTimeout
	EventProgressingTimeout = lsv1alpha1.ReasonProgressingTimeout
	EventAbortingTimeout    = lsv1alpha1.ReasonAbortingTimeout
	EventBadAnnotation      = "InvalidTimeoutSetting"
)

// Reconciler enforces the timeouts.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. An item is failed only
	// after a live read confirms the timeout, because the cache may lag a
	// deployer's pickup by a moment.
	APIReader client.Reader
	// Recorder emits events on the deploy items.
	Recorder events.EventRecorder
	// FieldManager is the field manager of every write.
	FieldManager string
	// Config holds the timeouts.
	Config Config
	// Now returns the current time; tests may replace it.
	Now func() time.Time

	// warned remembers the hand-overs the pickup warning was emitted for.
	warned warnedPickups
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := setup.Check("timeouts", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder), setup.Required("FieldManager", r.FieldManager)); err != nil {
		return err
	}
	for name, t := range map[string]Timeout{"pickup": r.Config.Pickup, "progressing": r.Config.Progressing, "abort": r.Config.Abort} {
		if !t.Disabled && t.Duration <= 0 {
			return fmt.Errorf("timeouts: %s timeout must be positive or disabled, got %s", name, t.Duration)
		}
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(opts).
		// Status and annotation changes both matter (phase, lastReconcileTime,
		// reconcile-time, operation), so no generation filter; a resync is not
		// needed because every pending timeout is a RequeueAfter.
		// A deletion needs no reconcile; it only drops what the pickup
		// warning remembers of the item (no reconcile would find it gone).
		For(&lsv1alpha1.DeployItem{}, builder.WithPredicates(predicate.Funcs{
			DeleteFunc: func(e event.TypedDeleteEvent[client.Object]) bool {
				r.warned.forget(client.ObjectKeyFromObject(e.Object))
				return false
			},
		})).
		Complete(r)
}

// scope is the state of one reconcile of a deploy item.
type scope struct {
	key  types.NamespacedName
	item *lsv1alpha1.DeployItem
	// d is what Evaluate decided for item.
	d Decision
}

// Reconcile evaluates the timeouts of one deploy item: from the cache, then,
// when an action is due, from a live read, and acts on it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &scope{key: req.NamespacedName}
	res, err := flow.Run(ctx, s, r.readItem, r.evaluate, r.confirmLive, r.act)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Someone (usually the deployer) changed the item meanwhile; their
		// write triggers a fresh evaluation.
		ctrl.LoggerFrom(ctx).V(1).Info("item changed while acting on timeout", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return res.Ctrl(), err
}

// readItem reads the item from the cache.
func (r *Reconciler) readItem(ctx context.Context, s *scope) (flow.Result, error) {
	s.item = &lsv1alpha1.DeployItem{}
	if err := r.Client.Get(ctx, s.key, s.item); err != nil {
		if apierrors.IsNotFound(err) {
			r.warned.forget(s.key)
		}
		return flow.Stop(), client.IgnoreNotFound(err)
	}
	return flow.Continue(), nil
}

// evaluate decides on the cached copy; with nothing due it asks to be
// called when the next timeout expires.
func (r *Reconciler) evaluate(ctx context.Context, s *scope) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	d, err := Evaluate(s.item, r.Now(), r.Config)
	if err != nil {
		// A broken annotation or spec.timeout is the user's to fix; say so
		// once per change instead of retrying in a loop.
		log.Info("ignoring invalid timeout setting", "error", err.Error())
		r.Recorder.Eventf(s.item, nil, corev1.EventTypeWarning, EventBadAnnotation, "EvaluateTimeouts", "%s", err.Error())
	}
	if d.Action != ActionNone {
		return flow.Continue(), nil
	}
	r.warnPickup(ctx, s.item, d, false)
	if d.RequeueAfter > 0 {
		log.V(1).Info("next timeout", "requeueAfter", d.RequeueAfter)
	}
	return flow.Stop().RequeueAfter(d.RequeueAfter), nil
}

// confirmLive decides again on a live read: the deployer may have just
// picked the item up or finished it, and the cache may not show it yet.
func (r *Reconciler) confirmLive(ctx context.Context, s *scope) (flow.Result, error) {
	live := &lsv1alpha1.DeployItem{}
	if err := r.APIReader.Get(ctx, s.key, live); err != nil {
		return flow.Stop(), client.IgnoreNotFound(err)
	}
	s.item = live
	s.d, _ = Evaluate(live, r.Now(), r.Config)
	// The warning due with an action (a pickup that fails now, say) comes
	// from the same live read: no second one.
	r.warnPickup(ctx, live, s.d, true)
	if s.d.Action == ActionNone {
		// The timeout is no longer due: the cache lagged. The event
		// carrying the fresh state re-triggers us.
		return flow.Stop().RequeueAfter(s.d.RequeueAfter), nil
	}
	return flow.Continue(), nil
}
