// Package timeouts enforces the deploy-item timeouts of the deployer contract
// (seed 001) on every DeployItem, whether an execution created it or not:
//
//   - pickup: reconcile-time older than the pickup timeout → phase Failed,
//     lastError{WaitingForPickup, PickupTimeout, [ERR_TIMEOUT]};
//   - progressing: Init/Progressing for longer than spec.timeout (or the
//     default) since status.lastReconcileTime → operation: abort, abort-time
//     and abort-reason in one write (a deletion is bounded by its deployer
//     instead);
//   - abort: abort-time older than the abort timeout → phase Failed.
//
// Before the pickup timeout fails an item, a Warning event WaitingForPickup
// (on the item and on its Execution) says early, once per hand-over, that no
// deployer has picked it up (pickupwarning.go).
//
// It never polls: every reconcile computes when the item's next timeout
// expires and asks for exactly that RequeueAfter.
//
// Writing phase and lastError is normally the deployer's job; failing an item
// on timeout is the one documented exception (BRIEF, "Deploy items and jobs"),
// done with a merge patch touching only phase, lastError and jobIDFinished,
// guarded by the resourceVersion so a deployer's concurrent final write wins.
package timeouts

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/setup"
)

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "deployitem-timeouts"

// Event reasons (filterable with kubectl get events --field-selector reason=...).
const (
	EventPickupTimeout      = lsv1alpha1.ReasonPickupTimeout
	EventProgressingTimeout = lsv1alpha1.ReasonProgressingTimeout
	EventAbortingTimeout    = lsv1alpha1.ReasonAbortingTimeout
	EventBadAnnotation      = "InvalidTimeoutSetting"
)

// AbortReasonAnnotation says why this controller asked for an abort. It is
// written in the same merge patch as operation: abort and abort-time (no
// extra request) and removed with them, so the deployer can end the item
// with lastError reason ProgressingTimeout and ERR_TIMEOUT (as Landscaper
// reports a progressing timeout) instead of a plain "aborted on request".
// Its value is "<Reason>: <message>", e.g.
// "ProgressingTimeout: the deploy item was progressing for longer than its
// progressing timeout (20s)".
const AbortReasonAnnotation = lsv1alpha1.AbortReasonAnnotation

// Least privilege for this reconciler (collected into the binary's ClusterRole by make generate-rbac).
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

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

// Reconcile evaluates the timeouts of one deploy item.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	item := &lsv1alpha1.DeployItem{}
	if err := r.Client.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			r.warned.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d, err := Evaluate(item, r.Now(), r.Config)
	if err != nil {
		// A broken annotation or spec.timeout is the user's to fix; say so
		// once per change instead of retrying in a loop.
		log.Info("ignoring invalid timeout setting", "error", err.Error())
		r.Recorder.Eventf(item, nil, corev1.EventTypeWarning, EventBadAnnotation, "EvaluateTimeouts", "%s", err.Error())
	}
	if d.Action == ActionNone {
		r.warnPickup(ctx, item, d, false)
		if d.RequeueAfter > 0 {
			log.V(1).Info("next timeout", "requeueAfter", d.RequeueAfter)
		}
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}

	// Confirm with a live read: the deployer may have just picked the item
	// up or finished it, and the cache may not show it yet.
	live := &lsv1alpha1.DeployItem{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, live); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d, _ = Evaluate(live, r.Now(), r.Config)
	// The warning due with an action (a pickup that fails now, say) comes
	// from the same live read: no second one.
	r.warnPickup(ctx, live, d, true)
	log = log.WithValues("action", d.Action.String(), "jobID", live.Status.JobID)
	switch d.Action {
	case ActionFailPickup:
		err = r.fail(ctx, live, lsv1alpha1.Error{
			Operation: lsv1alpha1.OperationWaitingForPickup,
			Reason:    lsv1alpha1.ReasonPickupTimeout,
			Message:   fmt.Sprintf("no deployer has reconciled this deployitem within %d seconds", int64(d.Timeout.Seconds())),
			Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout},
		}, lsv1alpha1.ReconcileTimeAnnotation)
		if err == nil {
			log.Info("deploy item failed: pickup timeout")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventPickupTimeout, "Fail",
				"no deployer has reconciled this deploy item within %s", d.Timeout)
		}
	case ActionFailAbort:
		err = r.fail(ctx, live, lsv1alpha1.Error{
			Operation: lsv1alpha1.OperationWaitingForAbort,
			Reason:    lsv1alpha1.ReasonAbortingTimeout,
			Message:   fmt.Sprintf("deployer has not aborted progressing this deploy item within %d seconds", int64(d.Timeout.Seconds())),
			Codes:     []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout},
		}, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation)
		if err == nil {
			log.Info("deploy item failed: abort timeout")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventAbortingTimeout, "Fail",
				"the deployer has not aborted this deploy item within %s", d.Timeout)
		}
	case ActionAbort:
		err = r.abort(ctx, live, d.Timeout)
		if err == nil {
			log.Info("deploy item progressing too long: abort requested")
			r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventProgressingTimeout, "Abort",
				"deploy item has been progressing for longer than %s; aborting", d.Timeout)
		}
	default:
		// The live object shows the timeout is no longer due: the cache
		// lagged. The event carrying the fresh state re-triggers us.
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Someone (usually the deployer) changed the item meanwhile; their
		// write triggers a fresh evaluation.
		log.V(1).Info("item changed while acting on timeout", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// fail ends the item's current job as Failed with lastError, then removes the
// annotations that drove the timeout, and any abort request, so a later job
// does not inherit them.
func (r *Reconciler) fail(ctx context.Context, item *lsv1alpha1.DeployItem, lastErr lsv1alpha1.Error, removeAnnotations ...string) error {
	if err := patch.FailItem(ctx, r.Client, r.FieldManager, item, lastErr, r.Now()); err != nil {
		return err
	}
	remove := map[string]*string{}
	for _, k := range removeAnnotations {
		remove[k] = nil
	}
	if lsv1alpha1.Operation(item.Annotations[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationAbort {
		// The job is over: an abort request (say one left over from an
		// earlier job, which Evaluate ignores as stale) has nothing left to
		// abort. It goes with this write rather than stay for ever.
		remove[lsv1alpha1.OperationAnnotation] = nil
		remove[lsv1alpha1.AbortTimeAnnotation] = nil
	}
	if _, ok := item.Annotations[AbortReasonAnnotation]; ok {
		// Goes with the abort request it explains.
		remove[AbortReasonAnnotation] = nil
	}
	return patch.Annotations(ctx, r.Client, r.FieldManager, item, "", remove)
}

// abort asks the deployer to stop: operation: abort plus abort-time, which
// starts the abort timeout, and the abort's reason (AbortReasonAnnotation),
// all in one write. The resourceVersion guard keeps it from aborting a job
// that finished a moment ago.
func (r *Reconciler) abort(ctx context.Context, item *lsv1alpha1.DeployItem, progressing time.Duration) error {
	op, at := string(lsv1alpha1.OperationAbort), r.Now().UTC().Format(time.RFC3339)
	why := ProgressingTimeoutAbortReason(progressing)
	return patch.Annotations(ctx, r.Client, r.FieldManager, item, item.ResourceVersion, map[string]*string{
		lsv1alpha1.OperationAnnotation: &op,
		lsv1alpha1.AbortTimeAnnotation: &at,
		AbortReasonAnnotation:          &why,
	})
}

// ProgressingTimeoutAbortReason is the AbortReasonAnnotation value of an
// abort the progressing timeout requested.
func ProgressingTimeoutAbortReason(progressing time.Duration) string {
	return fmt.Sprintf("%s: the deploy item was progressing for longer than its progressing timeout (%s)",
		lsv1alpha1.ReasonProgressingTimeout, progressing)
}
