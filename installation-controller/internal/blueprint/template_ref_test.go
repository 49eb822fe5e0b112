package blueprint

import (
	"strings"
	"testing"
)

// A sub-installation template's blueprint.ref is a cd:// URI or
// {resourceName}, a resource of the parent's component; anything else is
// refused naming both forms.
func TestTemplateBlueprintRef(t *testing.T) {
	for _, tc := range []struct {
		ref  any
		want string
	}{
		{"cd://componentReferences/child/resources/bp", "cd://componentReferences/child/resources/bp"},
		{map[string]any{"resourceName": "bp"}, "cd://resources/bp"},
	} {
		tpl, err := DecodeInstallationTemplate(map[string]any{"name": "sub", "blueprint": map[string]any{"ref": tc.ref}})
		if err != nil {
			t.Fatalf("%v: %v", tc.ref, err)
		}
		if tpl.Blueprint.Ref == nil || tpl.Blueprint.Ref.URI != tc.want {
			t.Errorf("%v: got %+v, want %s", tc.ref, tpl.Blueprint.Ref, tc.want)
		}
	}
	for _, bad := range []any{map[string]any{"resourceName": ""}, 42, []any{"x"}} {
		_, err := DecodeInstallationTemplate(map[string]any{"name": "sub", "blueprint": map[string]any{"ref": bad}})
		if err == nil || !strings.Contains(err.Error(), "cd:// resource URI or {resourceName: <name>}") {
			t.Errorf("%v: got %v", bad, err)
		}
	}
}
