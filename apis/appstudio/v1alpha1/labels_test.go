package v1alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	short := "staging-dtc"
	if got := LabelValue(short); got != short {
		t.Errorf("LabelValue(%q) = %q, want it unchanged", short, got)
	}
	long := strings.Repeat("a", 50) + "-" + strings.Repeat("b", 50)
	other := strings.Repeat("a", 50) + "-" + strings.Repeat("c", 50)
	// The cut falls right after the dash: it is trimmed.
	edge := strings.Repeat("x", 51) + "-" + strings.Repeat("y", 40)
	for _, name := range []string{long, other, edge, strings.Repeat("z", 253)} {
		v := LabelValue(name)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("LabelValue(%d characters) = %q is not a label value: %v", len(name), v, errs)
		}
		if LabelValue(name) != v {
			t.Errorf("LabelValue is not stable for %q", name)
		}
	}
	if LabelValue(long) == LabelValue(other) {
		t.Errorf("two names with the same beginning got the same value %q", LabelValue(long))
	}
}

func TestClaimAndClassOf(t *testing.T) {
	long := strings.Repeat("a", 70)
	annotated := &metav1.ObjectMeta{
		Labels:      map[string]string{ClaimLabel: LabelValue(long), ClassLabel: "cls"},
		Annotations: map[string]string{ClaimLabel: long, ClassLabel: "cls"},
	}
	if ClaimOf(annotated) != long || ClassOf(annotated) != "cls" {
		t.Errorf("ClaimOf/ClassOf = %q/%q, want the annotations", ClaimOf(annotated), ClassOf(annotated))
	}
	labelOnly := &metav1.ObjectMeta{Labels: map[string]string{ClaimLabel: "c", ClassLabel: "cls"}}
	if ClaimOf(labelOnly) != "c" || ClassOf(labelOnly) != "cls" {
		t.Errorf("ClaimOf/ClassOf of a label-only object = %q/%q", ClaimOf(labelOnly), ClassOf(labelOnly))
	}
}
