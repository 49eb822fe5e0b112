package tmpl

import (
	"strings"
	"testing"
)

// A render that fails reading an entry a collection does not have names the
// entries there are, in either form a template reads it: a field chain or
// index with quoted keys.
func TestBindingHintNamesTheCollectionsEntries(t *testing.T) {
	values := map[string]any{
		"imports":     map[string]any{"cluster": map[string]any{}},
		"deployitems": map[string]any{"app": map[string]any{"host": "h"}},
		"values":      map[string]any{"deployitems": map[string]any{"app": map[string]any{"host": "h"}}},
	}
	items := []Collection{
		{Path: "deployitems", Noun: "deploy item", Owner: "the execution", Names: []string{"app", "quiet"}, NoValue: "exported nothing"},
		{Path: "values.deployitems", Noun: "deploy item", Owner: "the execution", Names: []string{"app", "quiet"}, NoValue: "exported nothing"},
	}
	for _, tc := range []struct{ tpl, want string }{
		{`{{ .deployitems.ap.host }}`, `; the execution has no deploy item "ap" (its deploy items: app, quiet)`},
		{`{{ index .values "deployitems" "my-item" "host" }}`, `; the execution has no deploy item "my-item" (its deploy items: app, quiet)`},
		{`{{ .values.deployitems.quiet.host }}`, `; deploy item "quiet" exported nothing`},
		{`{{ .imports.clustr.metadata }}`, `; the blueprint has no import "clustr" (its imports: cluster)`},
		{`{{ .deployitems.app.host.x }}`, ``},
	} {
		_, err := Execute(Source{Execution: "x", File: "blueprint.yaml", Line: 1, Template: tc.tpl, Collections: items}, values)
		if tc.want == "" {
			if err == nil {
				t.Fatalf("%s: want an error", tc.tpl)
			}
			if strings.Contains(err.Error(), "; the execution") || strings.Contains(err.Error(), "exported nothing") {
				t.Errorf("%s: want no hint, got %v", tc.tpl, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q in the error, got %v", tc.tpl, tc.want, err)
		}
	}
}
