package installation

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// phaseFunc is one phase of the job: it returns the phase to move to, or a
// flow error: Waiting (what it waits for: waitError), Stalled (the job ends
// Failed or DeleteFailed), anything else is retried. phaseDeleting sets
// s.gone instead of a next phase.
type phaseFunc func(context.Context, *scope) (lsv1alpha1.Phase, error)

func (r *Reconciler) phaseOf(p lsv1alpha1.Phase) phaseFunc {
	switch p {
	case lsv1alpha1.PhaseInit:
		return r.phaseInit
	case lsv1alpha1.PhaseCleanupOrphaned:
		return r.phaseCleanupOrphaned
	case lsv1alpha1.PhaseObjectsCreated:
		return r.phaseObjectsCreated
	case lsv1alpha1.PhaseProgressing:
		return r.phaseProgressing
	case lsv1alpha1.PhaseCompleting:
		return r.phaseCompleting
	case lsv1alpha1.PhaseInitDelete:
		return r.phaseInitDelete
	case lsv1alpha1.PhaseTriggerDelete:
		return r.phaseTriggerDelete
	case lsv1alpha1.PhaseDeleting:
		return r.phaseDeleting
	}
	return nil
}

// runPhase runs the phases of the running job, each in a span of its own
// ("Installation.<Phase>"), as long as the next may run in this reconcile
// (chains): the job is handed to sub-objects from there.
func (r *Reconciler) runPhase(ctx context.Context, s *scope) (flow.Result, error) {
	for {
		res, err := r.runOnePhase(ctx, s)
		if err != nil || res.Stopped() {
			return res, err
		}
	}
}

// chains reports whether the phase entered may run in the same reconcile:
// every phase that does not need the cache to show deletions of this
// reconcile.
func chains(s *scope, p lsv1alpha1.Phase) bool {
	if s.deleted {
		return false
	}
	switch p {
	case lsv1alpha1.PhaseCleanupOrphaned, lsv1alpha1.PhaseObjectsCreated, lsv1alpha1.PhaseProgressing,
		lsv1alpha1.PhaseCompleting, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting:
		return true
	}
	return false
}

// runOnePhase runs the current phase and applies what it decided; it
// continues when the next phase runs in the same reconcile.
func (r *Reconciler) runOnePhase(ctx context.Context, s *scope) (flow.Result, error) {
	phase := s.inst.Status.Phase
	fn := r.phaseOf(phase)
	if fn == nil {
		return flow.Stop(), nil
	}
	next, err := r.runTraced(ctx, s, phase, fn)
	switch {
	case flow.IsStalled(err):
		r.jobFailed(ctx, s, phase, err)
		return flow.Stop(), nil
	case flow.IsWaiting(err):
		return r.phaseWaits(ctx, s, phase, waitOf(err)), nil
	case err != nil:
		r.phaseRetried(s, phase, err)
		return flow.Stop(), err
	case s.gone:
		r.deleted(s)
		return flow.Stop(), nil
	}
	return r.enter(ctx, s, phase, next), nil
}

// runTraced runs fn in the phase's span and records what it waits for.
func (r *Reconciler) runTraced(ctx context.Context, s *scope, phase lsv1alpha1.Phase, fn phaseFunc) (lsv1alpha1.Phase, error) {
	pctx, span := tracing.StartStep(ctx, tracer(), Kind, string(phase), tracing.AttrPhase.String(string(phase)))
	next, err := fn(pctx, s)
	w := waitOf(err)
	// Recorded anew on every run of a phase, so the record goes with the
	// wait.
	r.waits.set(key(s.inst), w.object())
	spanErr := err
	if w != nil {
		span.SetAttributes(AttrWaitingFor.String(w.msg))
		// A wait is no failure of the phase.
		spanErr = nil
	}
	tracing.EndStep(span, spanErr)
	return next, err
}

// enter moves the job from phase to next; it continues when next runs in
// this reconcile.
func (r *Reconciler) enter(ctx context.Context, s *scope, phase, next lsv1alpha1.Phase) flow.Result {
	inst, job := s.inst, s.inst.Status.JobID
	r.Rechecks.Forget(key(inst))
	logf.FromContext(ctx).V(1).Info("phase done", "next", next)
	inst.Status.Phase = next
	if readyIsWaiting(inst) && !next.IsFinal() {
		// The wait is over: Ready said what the phase waited for (a name
		// held by an object on its way out, successors, orphans), and the
		// phase a status write shows next may say nothing of its own (one
		// entered in the next reconcile, say, or one that ends in an
		// error to retry), so the message would outlive the wait. It goes
		// with this transition's status write, which happens anyway (the
		// phase changed): no request more. A final phase sets Ready below.
		status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonProgressing,
			fmt.Sprintf("job %s is running: the wait in phase %s is over", job, phase))
	}
	if next == lsv1alpha1.PhaseSucceeded {
		r.jobSucceeded(s)
		return flow.Stop()
	}
	if chains(s, next) {
		return flow.Continue()
	}
	// The status write triggers the next reconcile, which runs the phase.
	return flow.Stop()
}
