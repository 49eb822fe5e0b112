package execution

import (
	"context"
	"strings"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// orphansOf returns the execution's items that left its spec before the
// running job started (they are not in the job's item set), by item name.
// An item that leaves the spec mid-job is still the job's: the next job
// deletes it.
func orphansOf(s *scope) map[string]*lsv1alpha1.DeployItem {
	inJob := jobItems(s.exec)
	orphans := map[string]*lsv1alpha1.DeployItem{}
	for n, di := range s.items {
		if !inJob[n] {
			orphans[n] = di
		}
	}
	return orphans
}

// cleanupOrphans deletes items that left the spec, in reverse dependency
// order. It reports true once none is left; a failed deletion fails the job
// once no other orphan is still being deleted.
func (r *Reconciler) cleanupOrphans(ctx context.Context, s *scope) (bool, error) {
	orphans := orphansOf(s)
	if len(orphans) == 0 {
		return true, nil
	}
	failed, running, err := r.deleteInOrder(ctx, s, orphans, false)
	if err != nil {
		return false, err
	}
	if len(failed) > 0 && !running {
		r.failJob(ctx, s, OperationReconcile, ReasonOrphanDeleteFailed,
			"deleting orphaned deploy items failed: "+strings.Join(failed, ", ")+firstCause(orphans, failed), "")
	}
	return false, nil
}

// retryFailedOrphans asks the deployer to retry the deletion of every orphan
// whose deletion failed (operation: reconcile, with this job's span context),
// as InitDelete does for a deletion job. It runs once per job, when the job
// starts (Init): the orphan cleanup then waits for the retry, and a job only
// fails with OrphanDeletionFailed when the retry failed too. Without it, a
// deletion that failed once (say its Target was missing) would fail every
// later job at once, even after its cause was fixed.
func (r *Reconciler) retryFailedOrphans(ctx context.Context, s *scope) error {
	orphans := orphansOf(s)
	for _, n := range sortedKeys(orphans) {
		di := orphans[n]
		if deleteStateOf(di) != deleteFailed {
			continue
		}
		set := map[string]*string{lsv1alpha1.OperationAnnotation: ptr.To(string(lsv1alpha1.OperationReconcile))}
		set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); client.IgnoreNotFound(err) != nil {
			return err
		}
		// The patch's response (in di) carries the request, so the cleanup
		// in this reconcile already waits for the retry.
		logf.FromContext(ctx).Info("retrying the failed deletion of an orphaned deploy item", "item", n, "deployItem", di.Name)
	}
	return nil
}
