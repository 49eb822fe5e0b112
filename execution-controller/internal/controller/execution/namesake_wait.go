package execution

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terrace-dev/terrace/kit/flow"
)

// namesakeWait says why a write waits: the name of the object it is to
// write is held by a namesake on its way out, a deploy item (createItem,
// ReasonDeployItemNameTaken) or the exports DataObject (gatherExports,
// ReasonDataObjectNameTaken). It travels as the cause of a Waiting
// flow.Error: no failure, and no error the reconcile returns either (that
// would be retried with back-off and logged as a failed reconcile on every
// retry); the phase stops at it and runJob turns it into a result
// (waitForName).
type namesakeWait struct {
	// reason is the Progressing condition's reason meanwhile, and the
	// Warning event's; action is the event's action.
	reason, action string
	// logMsg is the log line's message (fixed per reason, so the line can be
	// searched for); msg says which object waits for which.
	logMsg, msg string
}

func (w namesakeWait) Error() string { return w.msg }

// deployItemNameTaken: a deploy item's name is held by a namesake on its way out.
func deployItemNameTaken(msg string) error {
	return waiting(namesakeWait{reason: ReasonDeployItemNameTaken, action: "CreateDeployItem",
		logMsg: "waiting for a namesake deploy item to go", msg: msg})
}

// dataObjectNameTaken: the exports DataObject's name is held by a namesake
// being deleted.
func dataObjectNameTaken(msg string) error {
	return waiting(namesakeWait{reason: ReasonDataObjectNameTaken, action: "WriteExports",
		logMsg: "waiting for a namesake exports DataObject to go", msg: msg})
}

// waiting is w as a Waiting flow.Error.
func waiting(w namesakeWait) error {
	return &flow.Error{Kind: flow.Waiting, Reason: w.reason, Err: w}
}

// waitOf is the namesake err waits for, nil when it is no such wait.
func waitOf(err error) *namesakeWait {
	var w namesakeWait
	if flow.IsWaiting(err) && errors.As(err, &w) {
		return &w
	}
	return nil
}

// DefaultNameRecheck is the default of Reconciler.NameRecheck.
const DefaultNameRecheck = time.Minute

func (r *Reconciler) nameRecheck() time.Duration {
	if r.NameRecheck > 0 {
		return r.NameRecheck
	}
	return DefaultNameRecheck
}

// waitForName is the result of a reconcile whose job waits for a namesake to
// go (w): it records that in the running job's Progressing condition (reason
// w.reason, still True), with a Warning event and an info log line when that
// is news (nameFree restores the condition once the name is free). The
// namesake's events wake the execution (its controller's watch, or
// namesakeWaiters); the requeue after NameRecheck is only a safety net should
// one be missed.
func (r *Reconciler) waitForName(ctx context.Context, s *scope, w *namesakeWait) flow.Result {
	log := logf.FromContext(ctx)
	res := flow.Stop().RequeueAfter(r.nameRecheck())
	st := &s.exec.Status
	c := meta.FindStatusCondition(st.Conditions, ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionTrue {
		// No job start recorded: nothing to say it on.
		log.V(1).Info(w.logMsg, "message", w.msg)
		return res
	}
	if c.Reason == w.reason && c.Message == w.msg {
		log.V(1).Info("still "+w.logMsg, "message", w.msg)
		return res
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: w.reason, Message: w.msg,
		ObservedGeneration: st.ObservedGeneration,
	})
	// Once written, like every event: not repeated on each reconcile.
	s.status.OnStored(func() {
		log.Info(w.logMsg, "message", w.msg)
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, w.reason, w.action, "%s", w.msg)
	})
	return res
}

// nameFree restores the job's Progressing condition that waitForName changed
// for a wait of reason once that name is free.
func nameFree(s *scope, reason string) {
	st := &s.exec.Status
	if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c == nil || c.Reason != reason {
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonJobStarted,
		Message: "job " + st.JobID + " started", ObservedGeneration: st.ObservedGeneration,
	})
}
