package installation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestScopedName(t *testing.T) {
	long := strings.Repeat("a", 260)
	cases := map[string]struct {
		ctx, ref, want string
	}{
		"root verbatim":   {"", "my-data", "my-data"},
		"sub scoped":      {"root", "a-endpoint", "root.a-endpoint"},
		"invalid hashed":  {"root", "My_Value", "ctx-"},
		"too long hashed": {long, "x", "ctx-"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ScopedName(tc.ctx, tc.ref)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("ScopedName(%q, %q) = %q, want prefix %q", tc.ctx, tc.ref, got, tc.want)
			}
			if tc.ctx != "" && len(validation.IsDNS1123Subdomain(got)) != 0 {
				t.Errorf("%q is not a valid object name", got)
			}
		})
	}
	if ScopedName("a", "My_Value") == ScopedName("b", "My_Value") {
		t.Error("different contexts must give different names")
	}
}

func TestSubInstallationNameAndLabelValue(t *testing.T) {
	if got := SubInstallationName("root", "db"); got != "root-db" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("x", 300)
	if got := SubInstallationName(long, "db"); len(validation.IsDNS1123Subdomain(got)) != 0 {
		t.Errorf("%q is not a valid name", got)
	}
	if got := labelValue(long); len(validation.IsValidLabelValue(got)) != 0 {
		t.Errorf("%q is not a valid label value", got)
	}
}
