package schema

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	obj := map[string]any{
		"type":     "object",
		"required": []any{"host"},
		"properties": map[string]any{
			"host": map[string]any{"type": "string"},
			"port": map[string]any{"type": "integer", "minimum": 1},
		},
	}
	cases := map[string]struct {
		schema, value any
		want          string
	}{
		"nil schema":     {nil, 42, ""},
		"ok":             {obj, map[string]any{"host": "h", "port": 80}, ""},
		"missing":        {obj, map[string]any{"port": 80}, "missing property 'host'"},
		"wrong type":     {obj, map[string]any{"host": 1}, "at /host: got number, want string"},
		"minimum":        {obj, map[string]any{"host": "h", "port": 0}, "at /port: minimum"},
		"invalid schema": {map[string]any{"type": "nope"}, 1, "invalid schema"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Validate("import x", tc.schema, tc.value)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
