package installation

import (
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// passedDown is what a deletion job passes down to the sub-objects it
// deletes (InitDelete): delete-without-uninstall (seed 002), so the deploy
// items of the whole tree go without their uninstall (the execution
// controller hands it to its items, the deployers skip the uninstall).
func passedDown(inst *lsv1alpha1.Installation) map[string]*string {
	set := map[string]*string{}
	if inst.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true" {
		yes := "true"
		set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = &yes
	}
	return set
}
