package timeouts

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/owner"
)

// EventWaitingForPickup is the Warning event saying that no deployer has
// picked up an item handed a job for Config.PickupWarning: the early sign of
// a stall that otherwise shows only when the pickup timeout fails the item
// (a type with a typo, no deployer for the type or its Target).
const EventWaitingForPickup = lsv1alpha1.OperationWaitingForPickup

// DefaultPickupWarning is how long an item may wait for its pickup before
// EventWaitingForPickup says so. A deployer that runs picks an item up within
// milliseconds; under a burst (a thousand jobs handed over at once on two
// cores) within tens of seconds. A minute is past that, so the warning does
// not cry wolf under load, and still a fifth of the default pickup timeout.
const DefaultPickupWarning = time.Minute

// PickupWait describes an item handed a job that no deployer has picked up
// for longer than the pickup warning, while its pickup timeout has not
// expired yet.
type PickupWait struct {
	// Stamp is the item's reconcile-time value: every hand-over writes a new
	// one, so it identifies the job the item waits to be picked up for.
	Stamp string
	// Since is when the item was handed the job (the stamp's time).
	Since time.Time
	// FailsAt is when the pickup timeout fails the item; zero when the
	// pickup timeout is disabled.
	FailsAt time.Time
}

// pickupWarning is the delay of the pickup warning, ok false when it is
// disabled. A zero Config.PickupWarning (a Config built without it) means
// DefaultPickupWarning.
func (c Config) pickupWarning() (time.Duration, bool) {
	return c.PickupWarning.Or(DefaultPickupWarning)
}

// warnedPickups remembers, per item, the hand-over (its UID and stamp) the
// WaitingForPickup warning was emitted for, so it is emitted once per job and
// not on every later reconcile of the stalled item. It lives in memory only:
// no status write (the healthy path must stay free of them, and a write would
// itself bring another reconcile); the price is that a restarted controller
// (or a new leader) emits the warning once more for an item still waiting.
// Entries go when the item shows another stamp or none (picked up, failed, or
// handed a new job) and when it is deleted, so only items stalled right now
// are remembered.
type warnedPickups struct {
	mu sync.Mutex
	m  map[types.NamespacedName]warnedPickup
}

type warnedPickup struct {
	uid   types.UID
	stamp string
}

// warned reports whether p is the hand-over key was warned of; an entry of
// another hand-over goes.
func (w *warnedPickups) warned(key types.NamespacedName, p warnedPickup) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, ok := w.m[key]
	if ok && cur != p {
		delete(w.m, key)
	}
	return ok && cur == p
}

func (w *warnedPickups) remember(key types.NamespacedName, p warnedPickup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]warnedPickup{}
	}
	w.m[key] = p
}

// forget drops key's entry.
func (w *warnedPickups) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// warnPickup emits EventWaitingForPickup on item (and on its Execution, if an
// execution controls it) once per hand-over, when d says the item has waited
// for its pickup past the warning. It costs nothing while no warning is due
// (a map lookup); a due one is confirmed by a live read first, so a pickup the
// cache does not show yet raises no false alarm. With confirmed, item is that
// live read already (and d its decision): it is not read again.
func (r *Reconciler) warnPickup(ctx context.Context, item *lsv1alpha1.DeployItem, d Decision, confirmed bool) {
	key := client.ObjectKeyFromObject(item)
	if d.PickupOverdue == nil {
		r.warned.forget(key)
		return
	}
	p := warnedPickup{uid: item.UID, stamp: d.PickupOverdue.Stamp}
	if r.warned.warned(key, p) {
		return
	}
	live, ld := item, d
	if !confirmed {
		live = &lsv1alpha1.DeployItem{}
		if err := r.APIReader.Get(ctx, key, live); err != nil {
			// Gone: nothing to warn about. Any other error: the next
			// reconcile (the pending pickup timeout's requeue at the latest)
			// tries again.
			ctrl.LoggerFrom(ctx).V(1).Info("pickup warning not confirmed", "error", err.Error())
			return
		}
		ld, _ = Evaluate(live, r.Now(), r.Config)
	}
	if ld.PickupOverdue == nil || live.UID != p.uid || ld.PickupOverdue.Stamp != p.stamp {
		// Picked up (or handed another job) meanwhile; the cache's event for
		// that brings the next reconcile.
		return
	}
	r.warned.remember(key, p)
	w := ld.PickupOverdue
	note := PickupWarningMessage(live, w, r.Now())
	ctrl.LoggerFrom(ctx).Info("deploy item not picked up yet", "type", live.Spec.Type, "handedOver", w.Since)
	exec := owningExecution(live)
	if exec == nil {
		r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, EventWaitingForPickup, "Warn", "%s", note)
		return
	}
	r.Recorder.Eventf(live, exec, corev1.EventTypeWarning, EventWaitingForPickup, "Warn", "%s", note)
	// The execution is what users look at (kubectl describe execution; the
	// installation only says it waits for it), and its conditions show a
	// job that seems to progress: say there which item stalls and why.
	r.Recorder.Eventf(exec, live, corev1.EventTypeWarning, EventWaitingForPickup, "Warn",
		"deploy item %s: %s", live.Name, note)
}

// PickupWarningMessage is the note of EventWaitingForPickup on item, which
// has waited for its pickup (w) until now.
func PickupWarningMessage(item *lsv1alpha1.DeployItem, w *PickupWait, now time.Time) string {
	question := "is a deployer for this type running?"
	if t := item.Spec.Target; t != nil {
		question = fmt.Sprintf("is a deployer for this type running and responsible for its Target %s?", t.Name)
	}
	outcome := "the pickup timeout is disabled: it waits until a deployer picks it up"
	if !w.FailsAt.IsZero() {
		outcome = fmt.Sprintf("it fails with %s at %s", lsv1alpha1.ReasonPickupTimeout, w.FailsAt.UTC().Format(time.RFC3339))
	}
	waited := now.Sub(w.Since).Truncate(time.Second)
	return fmt.Sprintf("no deployer has picked up this deploy item of type %s for %s; %s %s",
		item.Spec.Type, waited, question, outcome)
}

// owningExecution is a reference to the Execution controlling item, nil when
// none does (a standalone item). Which owner is an Execution is the rule the
// execution reconciler indexes items by (owner.Execution): an item it runs
// is an item whose stall is reported on its execution. The event names the
// version this binary knows (the reference may name another version of the
// same object).
func owningExecution(item *lsv1alpha1.DeployItem) *lsv1alpha1.Execution {
	ref := owner.Execution(item)
	if ref == nil {
		return nil
	}
	return &lsv1alpha1.Execution{
		TypeMeta:   metav1.TypeMeta{APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: owner.ExecutionKind},
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: item.Namespace, UID: ref.UID},
	}
}
