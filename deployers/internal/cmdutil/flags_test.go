package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/timeout"
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

// --default-timeout defaults to the library's 10m and takes a duration or
// "none", like the execution controller's --progressing-timeout.
func TestDefaultTimeoutFlag(t *testing.T) {
	for args, want := range map[string]timeout.Timeout{
		"":                       timeout.After(lib.DefaultTimeout),
		"--default-timeout=30m":  timeout.After(30 * time.Minute),
		"--default-timeout=none": timeout.Disabled(),
	} {
		var f Flags
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if f.DefaultTimeout != want {
			t.Errorf("%q: DefaultTimeout = %v, want %v", args, f.DefaultTimeout, want)
		}
	}
	var f Flags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse([]string{"--default-timeout=0s"}); err == nil {
		t.Error("--default-timeout=0s accepted")
	}
}
