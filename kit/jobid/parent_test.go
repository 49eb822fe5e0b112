package jobid

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ParentGone's rule, case by case: only a live parent of the same UID, or one
// whose deletion job will run (it has its finalizer), hands a deletion job over.
func TestParentGone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := lsv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	parent := func(uid types.UID, deleting bool, finalizers ...string) *lsv1alpha1.Installation {
		p := &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root", UID: uid, Finalizers: finalizers}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	child := func(ref *metav1.OwnerReference) *lsv1alpha1.Execution {
		e := &lsv1alpha1.Execution{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"}}
		if ref != nil {
			e.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		return e
	}
	yes := true
	controlledBy := func(kind, apiVersion string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "root", UID: "u1", Controller: &yes}
	}
	byRoot := controlledBy("Installation", lsv1alpha1.SchemeGroupVersion.String())
	for _, tc := range []struct {
		name   string
		parent *lsv1alpha1.Installation
		ref    *metav1.OwnerReference
		want   bool
	}{
		{"alive", parent("u1", false, lsv1alpha1.Finalizer), byRoot, false},
		{"deleting with its finalizer: its deletion job hands over", parent("u1", true, lsv1alpha1.Finalizer), byRoot, false},
		{"deleting without its finalizer", parent("u1", true, "foregroundDeletion"), byRoot, true},
		{"gone", nil, byRoot, true},
		{"replaced by a namesake", parent("u2", false, lsv1alpha1.Finalizer), byRoot, true},
		{"no controller", parent("u1", false, lsv1alpha1.Finalizer), nil, true},
		{"controlled by something else", parent("u1", false, lsv1alpha1.Finalizer), controlledBy("Installation", "example.com/v1"), true},
	} {
		b := fake.NewClientBuilder().WithScheme(scheme)
		if tc.parent != nil {
			b = b.WithObjects(tc.parent)
		}
		got, err := ParentGone(context.Background(), b.Build(), child(tc.ref))
		if err != nil || got != tc.want {
			t.Errorf("%s: ParentGone = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
