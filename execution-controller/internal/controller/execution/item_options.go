package execution

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// unchangedSinceSuccess reports whether the item of template t may skip a
// job under updateOnChangeOnly: its last job succeeded and ran the spec it
// has now (the deployer's observedGeneration), and that spec is the
// template's (a cached copy older than this controller's update of the item
// does not match, so it is never skipped on a stale read). An operation
// annotation on the item (a user's request) is honoured by a hand-over.
func unchangedSinceSuccess(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate, di *lsv1alpha1.DeployItem) bool {
	if t == nil || !t.UpdateOnChangeOnly || di == nil || di.DeletionTimestamp != nil {
		return false
	}
	st := di.Status
	return st.JobID != "" && jobid.Finished(st.JobID, st.JobIDFinished) && st.Phase == lsv1alpha1.PhaseSucceeded &&
		di.Generation == st.ObservedGeneration && operation(di) == "" && upToDate(exec, t, di)
}

// jobStates classifies the items of the job's graph g (see stateOf); an
// item whose turn has come (every dependency succeeded) and that
// updateOnChangeOnly lets skip the job counts as succeeded without being
// handed it, so its dependents start as they would after its job.
func (r *Reconciler) jobStates(s *scope, g depgraph.Graph, job string) func(string) itemState {
	memo := map[string]itemState{}
	var state func(string) itemState
	state = func(n string) itemState {
		if st, ok := memo[n]; ok {
			return st
		}
		memo[n] = statePending // the graph is acyclic; this only guards the recursion
		st := r.stateOf(s.items[n], job)
		if st == statePending && unchangedSinceSuccess(s.exec, template(s.exec, n), s.items[n]) && dependenciesSucceeded(g, n, state) {
			st = stateSucceeded
		}
		memo[n] = st
		return st
	}
	return state
}

func dependenciesSucceeded(g depgraph.Graph, n string, state func(string) itemState) bool {
	for _, d := range g[n] {
		if _, ok := g[d]; !ok || state(d) != stateSucceeded {
			return false
		}
	}
	return true
}

// clusterRemoved reports whether an item configured with
// onDelete.skipUninstallIfClusterRemoved lost its cluster: its Target is
// gone or being deleted, so what it installed can no longer be reached
// and its deletion goes without uninstalling. Read from the API server:
// the controller watches no Targets.
func (r *Reconciler) clusterRemoved(ctx context.Context, di *lsv1alpha1.DeployItem) (bool, error) {
	if di.Spec.OnDelete == nil || !di.Spec.OnDelete.SkipUninstallIfClusterRemoved || di.Spec.Target == nil {
		return false, nil
	}
	ns := di.Spec.Target.Namespace
	if ns == "" {
		ns = di.Namespace
	}
	target := &lsv1alpha1.Target{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: di.Spec.Target.Name}, target)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading Target %s/%s of deploy item %s (onDelete.skipUninstallIfClusterRemoved): %w", ns, di.Spec.Target.Name, di.Name, err)
	}
	return target.DeletionTimestamp != nil, nil
}
