package installation

import (
	"context"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// awaitSuccessorsGone makes a deletion wait in InitDelete until its
// successors (siblings importing what it exports) are deleted, unless the
// installation is annotated delete-ignore-successors (seed 002). The
// controller sets that annotation itself on what goes with its siblings: an
// orphaned sub-installation, or one deleted by hand that a sibling imports
// from.
func (r *Reconciler) awaitSuccessorsGone(ctx context.Context, inst *lsv1alpha1.Installation) error {
	if inst.Annotations[lsv1alpha1.DeleteIgnoreSuccessorsAnnotation] == "true" {
		return nil
	}
	succs, err := r.listByIndex(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
	if err != nil {
		return err
	}
	var names []string
	for _, sc := range succs {
		if parentName(sc) == parentName(inst) {
			names = append(names, sc.Name)
		}
	}
	if len(names) > 0 {
		return waitf("successors %s to be deleted first", strings.Join(names, ", "))
	}
	return nil
}
