package execution

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// deleteState classifies an item during deletion. Deployers delete an item
// when its deletionTimestamp is set (the deletion is the trigger; no job ID
// is handed to a deleting item, which would race with a deletion that fails
// fast), and remove their finalizer when done; a failed deletion leaves the
// item DeleteFailed, or Failed with a lastError of the deletion (see
// deleteStateOf).
type deleteState int

const (
	deleteNotStarted deleteState = iota
	deleteRunning
	deleteFailed
)

func deleteStateOf(di *lsv1alpha1.DeployItem) deleteState {
	if di.DeletionTimestamp == nil {
		return deleteNotStarted
	}
	le := di.Status.LastError
	if !di.Status.Phase.IsFailed() || le == nil || le.Operation == lsv1alpha1.OperationInterrupted ||
		operation(di) == lsv1alpha1.OperationReconcile { // a retry has been requested
		// An interrupt is this controller's own verdict on the install job,
		// never a deployer's on the deletion.
		return deleteRunning
	}
	// A deployer reports a failed deletion as DeleteFailed, or Failed with
	// lastError.operation Delete (the deployer library does). Times have a
	// resolution of one second, so an install job that failed in the same
	// second as the deletion must not count: only an error from a later
	// second is taken as the deletion's verdict without those marks.
	if di.Status.Phase == lsv1alpha1.PhaseDeleteFailed || le.Operation == OperationDelete ||
		le.LastUpdateTime.After(di.DeletionTimestamp.Time) {
		return deleteFailed
	}
	return deleteRunning
}

// deleteInOrder deletes the items of items that nothing else in items
// depends on (reverse dependency order), passing delete-without-uninstall on
// when withoutUninstall is set. It reports the names of items whose deletion
// failed and whether any deletion is still running.
func (r *Reconciler) deleteInOrder(ctx context.Context, s *scope, items map[string]*lsv1alpha1.DeployItem, withoutUninstall bool) (failed []string, running bool, err error) {
	g := depgraph.Graph{}
	for n, di := range items {
		g[n] = itemDependsOn(di)
	}
	deletable := map[string]bool{}
	for _, n := range g.Deletable() {
		deletable[n] = true
	}
	for _, n := range sortedKeys(items) {
		di := items[n]
		switch deleteStateOf(di) {
		case deleteFailed:
			// A failed deletion is a final verdict on the execution, so it
			// is confirmed live: the cache may not show yet that a retry was
			// requested (operation: reconcile) or started.
			live := &lsv1alpha1.DeployItem{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(di), live); err != nil {
				if apierrors.IsNotFound(err) {
					continue // gone meanwhile
				}
				return nil, false, err
			}
			if deleteStateOf(live) != deleteFailed {
				running = true
				continue
			}
			failed = append(failed, n)
			continue
		case deleteRunning:
			running = true
		case deleteNotStarted:
			if !deletable[n] {
				// Waits for its dependents. That is no progress of its own:
				// when nothing else runs, the dependents it waits for have
				// failed, and so has the deletion (else it would wait on a
				// failed item for ever).
				continue
			}
		}
		set := map[string]*string{}
		if withoutUninstall {
			set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = ptr.To("true")
		}
		if di.DeletionTimestamp == nil {
			// The deployer deletes the item in this job's trace (a deletion
			// job, or the orphan cleanup of an install job), not in the one
			// of the job that handed it its last job: the span context goes
			// in before the deletion, with delete-without-uninstall in one
			// write (only while tracing is on).
			set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
		}
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); err != nil {
			if apierrors.IsNotFound(err) {
				continue // gone meanwhile: nothing left to delete
			}
			return nil, false, err
		}
		if di.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, di, client.Preconditions{UID: &di.UID}); err != nil && !apierrors.IsNotFound(err) {
				return nil, false, fmt.Errorf("deleting deploy item %s: %w", di.Name, err)
			}
			running = true
			logf.FromContext(ctx).Info("deleting deploy item", "item", n, "deployItem", di.Name, "withoutUninstall", withoutUninstall)
			r.Recorder.Eventf(s.exec, di, corev1.EventTypeNormal, EventItemDeleted, "Delete", "deleting deploy item %s (%s)", di.Name, n)
		}
	}
	return failed, running, nil
}
