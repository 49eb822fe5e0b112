package installation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
)

// ReasonExportNameTaken: a Warning event when a job starts to wait for a
// DataObject or Target on its way out (being deleted, or left by an
// installation that is gone for garbage collection to delete) that holds the
// name of one of its exports or context copies (claim). The Ready condition
// (reason Waiting) says the same for as long as the job waits.
const ReasonExportNameTaken = "ExportNameTaken"

// waitNotice says a wait that may last, on someone else's object, once when
// it starts: a Warning event of reason and an info log line of logMsg.
type waitNotice struct{ reason, logMsg string }

// nameTakenNotice is the notice of a wait for a name (nameTaken).
var nameTakenNotice = &waitNotice{reason: ReasonExportNameTaken, logMsg: "job waits for a DataObject or Target name to be free"}

// waitFor is what a phase waits for: it travels up from wherever the wait
// is met (a phase's own check, or a write deep inside it whose name is held
// by an object on its way out: nameTaken) as a flow.Waiting error, so that
// the phase stops at it, and runOnePhase turns it into the phase's wait
// (Ready reason Waiting, re-checks as a safety net). It is no failure: as a
// plain error it would be retried with the controller's back-off (doubling
// up to about 16 minutes apart), logged as a "Reconciler error" on every
// retry, and shown only as a TransientError.
type waitFor struct {
	// msg says what the phase waits for.
	msg string
	// notice says a wait that may last (on someone else's object) once,
	// when it starts (a Warning event and an info line); nil for the waits
	// of a job's course (predecessors, sub-objects), which the Ready
	// condition alone shows.
	notice *waitNotice
	// on is the DataObject or Target whose events end the wait
	// (nameWaits); nil when other watches cover it.
	on *waitedObject
}

func (w *waitFor) Error() string { return "waiting for " + w.msg }

// object is what the wait is on, nil for none (or no wait).
func (w *waitFor) object() *waitedObject {
	if w == nil {
		return nil
	}
	return w.on
}

// waitError makes w the error that stops the phase.
func waitError(w *waitFor) error {
	return &flow.Error{Kind: flow.Waiting, Reason: ReasonWaiting, Err: w}
}

// waitf is the wait of a phase for what the message names.
func waitf(format string, args ...any) error {
	return waitError(&waitFor{msg: fmt.Sprintf(format, args...)})
}

// waitOf is the wait err carries, nil for none.
func waitOf(err error) *waitFor {
	var w *waitFor
	if flow.IsWaiting(err) && errors.As(err, &w) {
		return w
	}
	return nil
}

// waitedObject is a DataObject or Target a waiting job needs gone: its
// events wake the installation (nameWaits).
type waitedObject struct {
	kind, name string
	uid        types.UID
}

// key is the object's index key ("data/<name>", "target/<name>").
func (o *waitedObject) key() string {
	if o.kind == "Target" {
		return targetKey(o.name)
	}
	return dataKey(o.name)
}

func (o *waitedObject) newObject() client.Object {
	if o.kind == "Target" {
		return &lsv1alpha1.Target{}
	}
	return &lsv1alpha1.DataObject{}
}

// nameTaken is the wait of write w, whose object name is held by obj (a
// DataObject or Target, kind) on its way out (why): the name is free once
// obj is gone, and the write goes through then.
func nameTaken(w contextWrite, kind string, obj client.Object, why string) error {
	return waitError(&waitFor{
		msg: fmt.Sprintf("%s %s/%s to go (%s); %s is written once it is gone",
			kind, obj.GetNamespace(), obj.GetName(), why, w.what),
		notice: nameTakenNotice,
		on:     &waitedObject{kind: kind, name: obj.GetName(), uid: obj.GetUID()},
	})
}

// nameWaits remembers which installation's job waits for which DataObject
// or Target to go, so that the object's events (its deletion) wake it. The
// watches find an object's importers by index, but the waiting writer
// imports nothing of that name, and no index finds it from the name either:
// a context copy's name may be hashed, and which copies an installation
// writes depends on its blueprint's defaults. What a phase waits for is
// recorded each time it runs (runOnePhase), so the record lasts as long as
// the wait. It is kept in memory, as the cache is: a restarted controller
// reconciles every installation, and the waiting ones record their wait
// again. A lookup costs no request.
type nameWaits struct {
	mu sync.Mutex
	by map[types.NamespacedName]*waitedObject
}

// set records that the installation inst waits for o; nil: for nothing.
func (n *nameWaits) set(inst types.NamespacedName, o *waitedObject) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if o == nil {
		delete(n.by, inst)
		return
	}
	if n.by == nil {
		n.by = map[types.NamespacedName]*waitedObject{}
	}
	n.by[inst] = o
}

// waiters returns the installations in ns waiting for the object of index
// key k to go (a handful at most: the map holds waiting jobs only).
func (n *nameWaits) waiters(ns, k string) []ctrl.Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	var reqs []ctrl.Request
	for inst, o := range n.by {
		if inst.Namespace == ns && o.key() == k {
			reqs = append(reqs, ctrl.Request{NamespacedName: inst})
		}
	}
	return reqs
}

// wentMeanwhile reports whether o, which the installation's phase waits for
// (in namespace ns), is gone from the cache, or replaced, since the phase
// read it. Recorded only after that read, the wait may have missed the
// object's deletion event: then nothing would wake the job but a re-check.
// A cache read, on the rare path of a wait.
func (r *Reconciler) wentMeanwhile(ctx context.Context, ns string, o *waitedObject) bool {
	if o == nil {
		return false
	}
	cur := o.newObject()
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.name}, cur)
	return apierrors.IsNotFound(err) || (err == nil && cur.GetUID() != o.uid)
}

// noticedWaits remembers, per installation, the last wait (job and Ready
// message) whose notice was sent. Ready normally tells whether a wait is
// new, but a retried error replaces it while the wait may still stand; the
// notice is not repeated for that. In memory: a restarted controller may
// repeat one notice.
type noticedWaits struct {
	mu sync.Mutex
	by map[types.NamespacedName]string
}

func (n *noticedWaits) is(inst types.NamespacedName, job, msg string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.by[inst] == job+"\n"+msg
}

func (n *noticedWaits) set(inst types.NamespacedName, job, msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.by == nil {
		n.by = map[types.NamespacedName]string{}
	}
	n.by[inst] = job + "\n" + msg
}

func (n *noticedWaits) forget(inst types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.by, inst)
}

// phaseWaits records what the phase waits for and asks for a re-check, a
// safety net for a missed event.
func (r *Reconciler) phaseWaits(ctx context.Context, s *scope, phase lsv1alpha1.Phase, w *waitFor) flow.Result {
	inst, job := s.inst, s.inst.Status.JobID
	log := logf.FromContext(ctx)
	if r.wentMeanwhile(ctx, inst.Namespace, w.on) {
		// The object went between the phase's read and the record of the
		// wait, whose wake-up it may have missed: the phase runs again at
		// once instead of waiting for a re-check.
		log.V(1).Info("what the phase would wait for is gone already; running it again", "for", w.msg)
		return flow.Stop().RequeueAfter(time.Millisecond)
	}
	delay := r.Rechecks.When(key(inst))
	log.V(1).Info("waiting", "for", w.msg, "recheckAfter", delay)
	// Say what the job waits for (written only when it changes), so a
	// stall is never silent.
	msg := fmt.Sprintf("phase %s waits for %s", phase, w.msg)
	news := !status.Has(inst.Status.Conditions, status.ConditionReady, metav1.ConditionUnknown, ReasonWaiting, msg)
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonWaiting, msg)
	if n := w.notice; n != nil && news && !r.noticed.is(key(inst), job, msg) {
		// Once, when the wait starts (or changes), not on every
		// reconcile: after the status write that shows it. Not again
		// when Ready said something else meanwhile only because a
		// retried error interrupted the same wait.
		s.patch.OnStored(func() {
			r.noticed.set(key(inst), job, msg)
			log.Info(n.logMsg, "reason", n.reason, "for", w.msg)
			r.Recorder.Eventf(inst, nil, "Warning", n.reason, string(phase), "%s", msg)
		})
	}
	return flow.Stop().RequeueAfter(delay)
}
