package jobid

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// ParentGone's rule, case by case, against parents as the API server holds
// them: only a live parent of the same UID, or one whose deletion job will
// run (it has its finalizer), hands a deletion job over.
func TestParentGone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := lsv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := testenv.StartT(t, scheme)
	ctx := context.Background()
	const ns = "default"

	// parent creates an installation with finalizers; deleting, it is
	// deleted too (the finalizers keep it, with its deletionTimestamp).
	parent := func(name string, deleting bool, finalizers ...string) *lsv1alpha1.Installation {
		t.Helper()
		p := &lsv1alpha1.Installation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
			Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
				Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: "{}"}},
			}},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if deleting {
			if err := env.Client.Delete(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	yes := true
	controlledBy := func(apiVersion, name string, uid types.UID) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: "Installation", Name: name, UID: uid, Controller: &yes}
	}
	byInstallation := func(p *lsv1alpha1.Installation) *metav1.OwnerReference {
		return controlledBy(lsv1alpha1.SchemeGroupVersion.String(), p.Name, p.UID)
	}

	alive := parent("alive", false, lsv1alpha1.Finalizer)
	deleting := parent("deleting", true, lsv1alpha1.Finalizer)
	unfinalized := parent("unfinalized", true, "example.com/hold")
	namesake := parent("namesake", false, lsv1alpha1.Finalizer)
	for _, tc := range []struct {
		name string
		ref  *metav1.OwnerReference
		want bool
	}{
		{"alive", byInstallation(alive), false},
		{"deleting with its finalizer: its deletion job hands over", byInstallation(deleting), false},
		{"deleting without its finalizer", byInstallation(unfinalized), true},
		{"gone", controlledBy(lsv1alpha1.SchemeGroupVersion.String(), "gone", "u1"), true},
		{"replaced by a namesake", controlledBy(lsv1alpha1.SchemeGroupVersion.String(), namesake.Name, "an-earlier-uid"), true},
		{"no controller", nil, true},
		{"controlled by something else", controlledBy("example.com/v1", alive.Name, alive.UID), true},
	} {
		child := &lsv1alpha1.Execution{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"}}
		if tc.ref != nil {
			child.OwnerReferences = []metav1.OwnerReference{*tc.ref}
		}
		got, err := ParentGone(ctx, env.Client, child)
		if err != nil || got != tc.want {
			t.Errorf("%s: ParentGone = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
