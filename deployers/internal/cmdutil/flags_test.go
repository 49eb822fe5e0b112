package cmdutil

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestFlags(t *testing.T) {
	var f Flags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse([]string{"--target-selector=landscaper.gardener.cloud/environment=a", "--target-label-selector=tier!=x"}); err != nil {
		t.Fatal(err)
	}
	id, sel, err := f.Resolve("d")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "d") {
		t.Fatalf("identity %q does not start with the name", id)
	}
	target := func(ann, lbl map[string]string) *lsv1alpha1.Target {
		return &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Annotations: ann, Labels: lbl}}
	}
	if !sel.Matches(target(map[string]string{lsv1alpha1.EnvironmentAnnotation: "a"}, nil)) {
		t.Error("environment a not matched")
	}
	if sel.Matches(target(map[string]string{lsv1alpha1.EnvironmentAnnotation: "b"}, nil)) {
		t.Error("environment b matched")
	}
	if sel.Matches(target(map[string]string{lsv1alpha1.EnvironmentAnnotation: "a"}, map[string]string{"tier": "x"})) {
		t.Error("label selector ignored")
	}

	f = Flags{TargetSelector: "a in (", Identity: "me"}
	if _, _, err := f.Resolve("d"); err == nil {
		t.Error("a malformed selector was accepted")
	}
	f = Flags{Identity: "me"}
	if id, sel, err := f.Resolve("d"); err != nil || id != "me" || !sel.Matches(target(nil, nil)) {
		t.Errorf("Resolve = %q, %v, %v", id, sel, err)
	}
}
