package installation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// A context copy is free for the owner's sub-installations only when the
// owner no longer has that import in any form: spec imports, import data
// mappings, or the blueprint's imports (defaults fill those).
func TestNoLongerImportedBy(t *testing.T) {
	owner := &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	owner.Spec.Blueprint.Inline = &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{
		lsv1alpha1.BlueprintFileName: "imports:\n- name: declared\n  type: data\n  required: false\n"}}
	owner.Spec.Imports.Data = []lsv1alpha1.DataImport{{Name: "given", DataRef: "in"}}
	owner.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "cluster", Target: "c"}}
	owner.Spec.ImportDataMappings = map[string]lsv1alpha1.AnyJSON{"mapped": lsv1alpha1.NewAnyJSON([]byte(`"1"`))}
	copyOf := func(key, context string) *lsv1alpha1.DataObject {
		return &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Name: "p." + key,
			Labels: map[string]string{ContextLabel: context}, Annotations: map[string]string{KeyAnnotation: key}}}
	}
	for key, want := range map[string]bool{"given": false, "cluster": false, "mapped": false, "declared": false, "moved": true} {
		if got := noLongerImportedBy(owner, copyOf(key, "p")); got != want {
			t.Errorf("copy of %q: noLongerImportedBy = %v, want %v", key, got, want)
		}
	}
	if noLongerImportedBy(owner, copyOf("moved", "other")) {
		t.Error("an object in another context is no copy of p's")
	}
	owner.Spec.Blueprint.Inline.Filesystem[lsv1alpha1.BlueprintFileName] = "imports: [\n"
	if noLongerImportedBy(owner, copyOf("moved", "p")) {
		t.Error("a blueprint that does not parse frees nothing")
	}
}
