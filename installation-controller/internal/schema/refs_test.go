package schema

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

func validateIn(t *testing.T, doc Document, field string, value any) error {
	t.Helper()
	set, err := Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	return set.Validate(context.Background(), field, value)
}

func wantError(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// A schema may not make the controller open a file of its own machine, and
// the error says which reference was refused without quoting the file.
func TestFileReferenceIsRefusedUnread(t *testing.T) {
	content, err := os.ReadFile("/etc/hostname")
	if err != nil || len(strings.TrimSpace(string(content))) == 0 {
		t.Skip("no /etc/hostname to read")
	}
	secret := strings.TrimSpace(string(content))
	cases := map[string]map[string]any{
		"$ref":         {"$ref": "file:///etc/hostname"},
		"$schema":      {"$schema": "file:///etc/hostname"},
		"$id relative": {"$id": "file:///etc/", "$ref": "hostname"},
	}
	for name, sch := range cases {
		t.Run(name, func(t *testing.T) {
			err := validateIn(t, Document{Fields: map[string]any{"import x": sch}}, "import x", 1)
			wantError(t, err, "import x: invalid schema", `reference "file:///etc/hostname"`, "may only refer to parts of its blueprint")
			msg := err.Error()
			if strings.Contains(msg, secret) || strings.Contains(msg, "'"+secret[:1]+"'") {
				t.Fatalf("error %q quotes /etc/hostname", msg)
			}
		})
	}
}

// Nor may it make the controller send a request.
func TestNetworkReferenceIsRefusedUnrequested(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	ref := srv.URL + "/schema.json"
	err := validateIn(t, Document{Fields: map[string]any{"import x": map[string]any{"$ref": ref}}}, "import x", "a")
	wantError(t, err, `reference "`+ref+`"`, "may only refer to parts of its blueprint")
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
}

func TestComponentReferenceIsNotSupportedYet(t *testing.T) {
	sch := map[string]any{"$ref": "cd://componentReferences/db/resources/schema"}
	err := validateIn(t, Document{Fields: map[string]any{"import x": sch}}, "import x", 1)
	wantError(t, err, `reference "cd://componentReferences/db/resources/schema"`, "not supported yet")
}

// What a blueprint holds resolves: fragments of the schema, its localTypes
// and the JSON files of its filesystem.
func TestBlueprintReferencesResolve(t *testing.T) {
	port := map[string]any{"type": "integer", "minimum": 1}
	doc := Document{
		LocalTypes: map[string]any{
			"port":     port,
			"endpoint": map[string]any{"type": "object", "properties": map[string]any{"port": map[string]any{"$ref": "local://port"}}},
			"defs":     map[string]any{"definitions": map[string]any{"port": port}},
		},
		Files: map[string]string{"schemas/port.json": `{"type": "integer", "minimum": 1}`},
		Fields: map[string]any{
			"definitions": map[string]any{"definitions": map[string]any{"p": port}, "$ref": "#/definitions/p"},
			"local":       map[string]any{"$ref": "local://port"},
			"nested":      map[string]any{"$ref": "local://endpoint"},
			"fragment":    map[string]any{"$ref": "local://defs#/definitions/port"},
			"file":        map[string]any{"$ref": "blueprint://schemas/port.json"},
			"unknown":     map[string]any{"$ref": "local://nope"},
			"no file":     map[string]any{"$ref": "blueprint://schemas/nope.json"},
			"relative":    map[string]any{"$ref": "port.json"},
		},
	}
	for _, f := range []string{"definitions", "local", "fragment", "file"} {
		if err := validateIn(t, doc, f, 80); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		wantError(t, validateIn(t, doc, f, 0), f+": value does not match its schema", "minimum")
	}
	if err := validateIn(t, doc, "nested", map[string]any{"port": 80}); err != nil {
		t.Error(err)
	}
	wantError(t, validateIn(t, doc, "nested", map[string]any{"port": "80"}), "at /port: got string, want integer")
	wantError(t, validateIn(t, doc, "unknown", 1), `reference "local://nope"`, `no local type "nope"`, "it has defs, endpoint, port")
	wantError(t, validateIn(t, doc, "no file", 1), `reference "blueprint://schemas/nope.json"`, `no file "schemas/nope.json"`)
	wantError(t, validateIn(t, doc, "relative", 1), `reference "field:///port.json"`, "relative reference")
}
