package timeouts

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// The pickup warning goes to the item's execution whenever the execution
// reconciler counts the item as that execution's (owner.Execution): a
// controller reference to any version of the group's Execution, named in the
// event with the version this binary knows.
func TestOwningExecution(t *testing.T) {
	controlled := func(apiVersion string) *lsv1alpha1.DeployItem {
		return &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop-db", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: "Execution", Name: "shop", UID: "u1", Controller: ptr.To(true),
		}}}}
	}
	for _, apiVersion := range []string{lsv1alpha1.SchemeGroupVersion.String(), lsv1alpha1.GroupName + "/v1beta1"} {
		got := owningExecution(controlled(apiVersion))
		if got == nil || got.Name != "shop" || got.Namespace != "ns" || got.UID != "u1" ||
			got.APIVersion != lsv1alpha1.SchemeGroupVersion.String() || got.Kind != "Execution" {
			t.Errorf("owner %s: owningExecution = %+v", apiVersion, got)
		}
	}
	if got := owningExecution(controlled("example.com/v1alpha1")); got != nil {
		t.Errorf("an Execution of another group: owningExecution = %+v", got)
	}
	if got := owningExecution(&lsv1alpha1.DeployItem{}); got != nil {
		t.Errorf("a standalone item: owningExecution = %+v", got)
	}
}
