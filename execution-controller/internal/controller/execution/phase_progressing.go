package execution

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// phaseProgressing hands the job to the items in dependency order (progress).
// An item of the job deleted by hand mid-job is recreated (with the spec it
// had at job start or newer), unless its entry left the spec; not once the
// job is failing: nothing starts any more.
func (r *Reconciler) phaseProgressing(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	st := &s.exec.Status
	if st.LastError == nil {
		err := r.syncItems(ctx, s, true)
		if flow.IsStalled(err) {
			// Like a failed item: no further item starts, and the job ends
			// Failed with it once no item of the job is still running (see
			// progress). Recorded in lastError, which marks the running job
			// as failing across reconciles.
			r.markFailing(ctx, s, flow.ReasonOf(err, ReasonFailed), err.Error(), lsv1alpha1.ErrorConfigurationProblem)
		} else if err != nil {
			// A wait too: nothing further starts until the item is created.
			return "", err
		}
	}
	jg, dropped := jobGraph(s)
	if len(dropped) > 0 {
		logf.FromContext(ctx).V(1).Info("deploy items of the job left the spec before they were created; not created",
			"items", dropped)
	}
	done, err := r.progress(ctx, s, jg, st.JobID)
	if err != nil || !done {
		return "", err
	}
	return lsv1alpha1.PhaseCompleting, nil
}

// progress hands the job to every item of the job's graph g (see jobGraph)
// whose dependencies have succeeded. Once an item failed no further item
// starts; the job ends Failed when no item runs any more. It reports true
// when every item succeeded. Items that wait for a dependency g does not hold
// (dropped from the job) can never start: once nothing else runs the job
// ends Failed (DependenciesRemoved) rather than wait for ever.
func (r *Reconciler) progress(ctx context.Context, s *scope, g depgraph.Graph, job string) (bool, error) {
	state := r.jobStates(s, g, job)
	var failed, running []string
	succeeded := 0
	for _, n := range g.Order() {
		if di := s.items[n]; di != nil && di.Status.JobID == job {
			// The cache shows the hand-over: nothing to remember about it.
			r.handedOver.Forget(client.ObjectKeyFromObject(di))
		}
		switch state(n) {
		case stateFailed:
			failed = append(failed, n)
		case stateRunning:
			running = append(running, n)
		case stateSucceeded:
			succeeded++
		}
	}
	if len(failed) > 0 || failing(s) {
		r.endFailingJob(ctx, s, failed, running)
		return false, nil
	}
	if succeeded == len(g) {
		return true, nil
	}
	startable := g.Startable(
		func(n string) bool { return state(n) != statePending },
		func(n string) bool { return state(n) == stateSucceeded },
	)
	if err := r.startItems(ctx, s, startable, job); err != nil {
		return false, err
	}
	if len(running) == 0 && len(startable) == 0 {
		// In a valid graph something runs or can start until every item
		// succeeded; here the items left wait for items the job dropped.
		r.failBlocked(ctx, s, g, state, job)
	}
	return false, nil
}

// endFailingJob ends a job with failed items, or marked failing, once none
// of its items runs any more.
func (r *Reconciler) endFailingJob(ctx context.Context, s *scope, failed, running []string) {
	log := logf.FromContext(ctx)
	switch {
	case len(running) > 0:
		log.V(1).Info("waiting for running deploy items before failing", "failed", failed, "running", running)
	case failing(s):
		// The cause recorded first (say a name conflict) is the job's.
		le := *s.exec.Status.LastError
		if len(failed) > 0 {
			le.Message += fmt.Sprintf("; deploy items failed: %s%s", strings.Join(failed, ", "), firstCause(s.items, failed))
		}
		r.finishJob(s, lsv1alpha1.PhaseFailed, &le)
	default:
		// The first failed item's own reason and message (bounded) say
		// why, so the execution's lastError (kubectl get execution -o
		// wide) shows the cause, not only the item's name; its codes
		// (say ERR_TIMEOUT) classify the job's failure alike.
		msg := fmt.Sprintf("deploy items failed: %s%s", strings.Join(failed, ", "), firstCause(s.items, failed))
		log.Info("job failed", "reason", ReasonDeployItemsFailed, "message", msg)
		r.finishJob(s, lsv1alpha1.PhaseFailed, &lsv1alpha1.Error{
			Operation: OperationReconcile, Reason: ReasonDeployItemsFailed, Message: msg, Codes: firstCodes(s.items, failed),
		})
	}
}

// startItems hands job to the startable items (handover.go).
func (r *Reconciler) startItems(ctx context.Context, s *scope, startable []string, job string) error {
	for _, n := range startable {
		di := s.items[n]
		if di == nil {
			continue // created this reconcile but not readable yet: the next event brings it
		}
		handed, err := r.handOver(ctx, di, job, slices.Contains(s.stamped, n))
		if err != nil {
			return err
		}
		if handed {
			logf.FromContext(ctx).Info("deploy item started", "item", n, "deployItem", di.Name)
		}
	}
	return nil
}

// failBlocked ends the job Failed (DependenciesRemoved): its pending items
// wait for items the job dropped.
func (r *Reconciler) failBlocked(ctx context.Context, s *scope, g depgraph.Graph, state func(string) itemState, job string) {
	var blocked, missing []string
	for _, n := range g.Order() {
		if state(n) != statePending {
			continue
		}
		blocked = append(blocked, n)
		for _, d := range g[n] {
			if _, ok := g[d]; !ok && !slices.Contains(missing, d) {
				missing = append(missing, d)
			}
		}
	}
	sort.Strings(missing)
	r.failJob(ctx, s, OperationReconcile, ReasonDependenciesRemoved,
		fmt.Sprintf("deploy items %s cannot run in job %s: they depend on %s, which left the spec before the job created it",
			strings.Join(blocked, ", "), job, strings.Join(missing, ", ")), lsv1alpha1.ErrorConfigurationProblem)
}

// itemState classifies an item against the execution's current job.
type itemState int

const (
	statePending itemState = iota // not handed the job yet
	stateRunning
	stateSucceeded
	stateFailed
)

// stateOf classifies di as the function stateOf does, except that an item
// this controller has just handed job to counts as running while the cache
// still shows the copy the hand-over replaced (handedOver): that copy shows
// the item's earlier job, but the item runs this one. Without it a reconcile
// in that moment could end the job (a sibling failed, or nothing seems to
// run) while the item deploys.
func (r *Reconciler) stateOf(di *lsv1alpha1.DeployItem, job string) itemState {
	st := stateOf(di, job)
	if st == statePending && di != nil && r.handedOver.Stale(client.ObjectKeyFromObject(di), di.ResourceVersion) {
		return stateRunning
	}
	return st
}

func stateOf(di *lsv1alpha1.DeployItem, job string) itemState {
	switch {
	case di == nil || di.Status.JobID != job:
		return statePending
	case !jobid.Finished(di.Status.JobID, di.Status.JobIDFinished):
		return stateRunning
	case di.Status.Phase == lsv1alpha1.PhaseInit || di.Status.Phase == lsv1alpha1.PhaseProgressing:
		// The job is finished, but the deployer re-applies within it (a
		// hook-forced re-apply against drift, still pending): not a failure;
		// its outcome is what counts.
		return stateRunning
	case di.Status.Phase == lsv1alpha1.PhaseSucceeded:
		return stateSucceeded
	default:
		return stateFailed
	}
}
