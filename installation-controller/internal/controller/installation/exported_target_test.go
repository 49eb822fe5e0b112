package installation

import (
	"strings"
	"testing"
)

// A target export value is a bare spec with labels and annotations, or a
// Target with them in metadata; labels that are not strings are refused
// naming them, not written.
func TestTargetOf(t *testing.T) {
	bare, err := targetOf(map[string]any{"type": "t", "config": map[string]any{"a": "b"}, "labels": map[string]any{"env": "dev"}})
	if err != nil || bare.spec.Type != "t" || bare.labels["env"] != "dev" || string(bare.spec.Config.RawMessage) != `{"a":"b"}` {
		t.Errorf("bare spec: %+v, %v", bare, err)
	}
	whole, err := targetOf(map[string]any{"metadata": map[string]any{"annotations": map[string]any{"team": "x"}}, "spec": map[string]any{"type": "t"}})
	if err != nil || whole.annotations["team"] != "x" || whole.spec.Type != "t" {
		t.Errorf("whole Target: %+v, %v", whole, err)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]any{"type": "t", "labels": map[string]any{"env": 3.0}}, `labels["env"] must be a string, got float64`},
		{map[string]any{"type": "t", "annotations": "x"}, `annotations must be a mapping of strings, got string`},
		{map[string]any{"config": map[string]any{}}, `has no type`},
		{"x", `must be a mapping with type and config`},
	} {
		if _, err := targetOf(tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want %q, got %v", tc.v, tc.want, err)
		}
	}
}
