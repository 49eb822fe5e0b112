package execution

import (
	"context"

	"k8s.io/utils/ptr"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// withoutUninstall reports whether the execution's items are to be deleted
// without uninstalling what they installed (delete-without-uninstall:
// "true" on the execution).
func withoutUninstall(exec *lsv1alpha1.Execution) bool {
	return exec.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
}

// phaseInitDelete passes delete-without-uninstall on to every item (and
// sets it on an item whose onDelete.skipUninstallIfClusterRemoved finds its
// Target gone: clusterRemoved), and on a retry asks the deployers to retry deletions that failed before - in one
// write per item, so a deployer never retries without seeing the former.
func (r *Reconciler) phaseInitDelete(ctx context.Context, s *scope) error {
	for _, n := range sortedKeys(s.items) {
		di := s.items[n]
		set := map[string]*string{}
		removed, err := r.clusterRemoved(ctx, di)
		if err != nil {
			return err
		}
		if withoutUninstall(s.exec) || removed {
			set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = ptr.To("true")
		}
		if deleteStateOf(di) == deleteFailed {
			set[lsv1alpha1.OperationAnnotation] = ptr.To(string(lsv1alpha1.OperationReconcile))
			// The deployer's retry belongs to this deletion job and its
			// trace (only while tracing is on).
			set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
		}
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); err != nil {
			return err
		}
	}
	s.exec.Status.Phase = lsv1alpha1.PhaseTriggerDelete
	return nil
}
