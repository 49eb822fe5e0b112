package unknownop

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func obj(uid, op string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: types.UID(uid)}
	if op != "-" {
		m.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: op}
	}
	return m
}

func TestCheckReportsEachUnknownValueOnce(t *testing.T) {
	accepted := []string{"reconcile", "interrupt"}
	var tr Tracker
	for i, step := range []struct {
		uid, op string
		want    bool
	}{
		{"1", "-", false},         // no annotation
		{"1", "reconcile", false}, // accepted
		{"1", "reconcil", true},   // a typo: reported
		{"1", "reconcil", false},  // ... once
		{"1", "recon", true},      // another value: reported
		{"1", "-", false},         // gone: forgotten
		{"1", "recon", true},      // the same typo made again later: reported again
		{"2", "recon", true},      // another object of the name
		{"2", "", true},           // an empty value is unknown too
	} {
		value, got := tr.Check(obj(step.uid, step.op), accepted)
		if got != step.want {
			t.Fatalf("step %d (%s %q): reported = %v, want %v", i, step.uid, step.op, got, step.want)
		}
		if got && value != step.op {
			t.Fatalf("step %d: value = %q, want %q", i, value, step.op)
		}
	}
	tr.Forget(types.NamespacedName{Namespace: "ns", Name: "x"})
	if _, got := tr.Check(obj("2", ""), accepted); !got {
		t.Fatal("a value reported before Forget is reported again after it")
	}
}
