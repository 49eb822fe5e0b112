package owner

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// An Execution of any version of the group controls; a kind of that name in
// another group, another kind, a reference that does not control, or none at
// all does not.
func TestExecution(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "exec", UID: "u1", Controller: ptr.To(controller)}}
	}
	for name, tc := range map[string]struct {
		refs []metav1.OwnerReference
		want bool
	}{
		"v1alpha1":                 {ref(lsv1alpha1.SchemeGroupVersion.String(), "Execution", true), true},
		"another version":          {ref(lsv1alpha1.GroupName+"/v1beta1", "Execution", true), true},
		"another group":            {ref("example.com/v1alpha1", "Execution", true), false},
		"a group ending like ours": {ref("x"+lsv1alpha1.GroupName+"/v1alpha1", "Execution", true), false},
		"a group extending ours":   {ref(lsv1alpha1.GroupName+".example.com/v1alpha1", "Execution", true), false},
		"no version":               {ref(lsv1alpha1.GroupName+"/", "Execution", true), false},
		"the core group":           {ref("v1", "Execution", true), false},
		"another kind":             {ref(lsv1alpha1.SchemeGroupVersion.String(), "Installation", true), false},
		"not the controller":       {ref(lsv1alpha1.SchemeGroupVersion.String(), "Execution", false), false},
		"no owner":                 {nil, false},
	} {
		o := &metav1.ObjectMeta{Name: "item", OwnerReferences: tc.refs}
		got := Execution(o)
		if (got != nil) != tc.want {
			t.Errorf("%s: Execution = %+v, want an Execution: %v", name, got, tc.want)
		}
		if got != nil && (got.Name != "exec" || got.UID != "u1") {
			t.Errorf("%s: Execution = %+v, not the controller reference", name, got)
		}
	}
}
