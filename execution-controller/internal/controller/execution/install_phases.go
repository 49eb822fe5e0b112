package execution

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// phaseFunc runs one phase of the install job: it returns the phase to
// move to ("" to stay in this one for now), or an error: Waiting (a
// namesake to go, see namesakeWait), Stalled (the job ends Failed with its
// reason), anything else is retried.
type phaseFunc func(context.Context, *scope) (lsv1alpha1.Phase, error)

// installPhase is the function of install phase p, nil for other phases.
func (r *Reconciler) installPhase(p lsv1alpha1.Phase) phaseFunc {
	switch p {
	case lsv1alpha1.PhaseInit:
		return r.phaseInit
	case lsv1alpha1.PhaseCleanupOrphaned:
		return r.phaseCleanupOrphaned
	case lsv1alpha1.PhaseProgressing:
		return r.phaseProgressing
	case lsv1alpha1.PhaseCompleting:
		return r.phaseCompleting
	}
	return nil
}

// runJob advances the install flow: Init (create/update items) →
// CleanupOrphaned → Progressing (hand the job to items in dependency order)
// → Completing (exports) → Succeeded, or Failed. Each phase runs in a span
// of its own ("Execution.<Phase>"), and the next one in the same reconcile
// as long as the job goes on.
func (r *Reconciler) runJob(ctx context.Context, s *scope) (flow.Result, error) {
	st := &s.exec.Status
	for jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		if st.Phase == lsv1alpha1.PhaseObjectsCreated {
			st.Phase = lsv1alpha1.PhaseProgressing
		}
		phase := st.Phase
		fn := r.installPhase(phase)
		if fn == nil {
			break
		}
		next, err := runTraced(ctx, s, phase, fn)
		switch w := waitOf(err); {
		case w != nil:
			return r.waitForName(ctx, s, w), nil
		case flow.IsStalled(err):
			// A write retrying cannot fix must not stall the job silently.
			r.failJob(ctx, s, OperationReconcile, flow.ReasonOf(err, ReasonFailed), err.Error(), lsv1alpha1.ErrorConfigurationProblem)
			return flow.Stop(), nil
		case err != nil:
			return flow.Stop(), err
		case next == "":
			return flow.Stop(), nil
		}
		st.Phase = next
	}
	return flow.Continue(), nil
}

// runTraced runs fn in the phase's span; a wait is no failure of the phase.
func runTraced(ctx context.Context, s *scope, phase lsv1alpha1.Phase, fn phaseFunc) (lsv1alpha1.Phase, error) {
	pctx, span := startPhase(ctx, phase)
	next, err := fn(pctx, s)
	if flow.IsWaiting(err) {
		tracing.EndStep(span, nil)
	} else {
		tracing.EndStep(span, err)
	}
	return next, err
}

// phaseInit creates or updates the items of the job's item set, and asks
// the deployers of orphans whose deletion failed to retry it.
func (r *Reconciler) phaseInit(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	st := &s.exec.Status
	if len(st.DeployItemReferences) == 0 {
		// No item set recorded (a job started by a controller version
		// that recorded none at the start, or the spec had no items
		// then): the spec as it is now is the set, rather than treating
		// every existing item as an orphan to delete.
		st.DeployItemReferences = specItemRefs(s.exec)
	}
	if err := r.syncItems(ctx, s, false); err != nil {
		return "", err
	}
	// Orphans whose deletion failed (in an earlier job) are asked to retry
	// it, once per job, as a deletion job does (InitDelete).
	if err := r.retryFailedOrphans(ctx, s); err != nil {
		return "", err
	}
	return lsv1alpha1.PhaseCleanupOrphaned, nil
}

// phaseCleanupOrphaned deletes the items that left the spec before the job
// started (orphans.go).
func (r *Reconciler) phaseCleanupOrphaned(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	done, err := r.cleanupOrphans(ctx, s)
	if err != nil || !done {
		return "", err
	}
	return lsv1alpha1.PhaseProgressing, nil
}

// phaseCompleting gathers the exports and ends the job Succeeded.
func (r *Reconciler) phaseCompleting(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	err := r.gatherExports(ctx, s)
	if err != nil && !flow.IsWaiting(err) && !flow.IsStalled(err) {
		st := &s.exec.Status
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: lsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonExportsFailed,
			Message: err.Error(), ObservedGeneration: st.ObservedGeneration,
		})
	}
	if err != nil {
		return "", err
	}
	r.finishJob(s, lsv1alpha1.PhaseSucceeded, nil)
	logf.FromContext(ctx).Info("job succeeded")
	return "", nil
}
