package schema

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// doubling returns definitions d0..dn, each an allOf of two references to
// the one before: a schema of n+1 definitions that expands to 2^n.
func doubling(n int) map[string]any {
	defs := map[string]any{"d0": map[string]any{"type": "integer"}}
	for i := 1; i <= n; i++ {
		prev := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i-1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"allOf": []any{prev, prev}}
	}
	return defs
}

// A schema expanding to 2^40 subschemas is refused when it is compiled
// (validating one value would take hours).
func TestExponentialSchemaIsRefused(t *testing.T) {
	sch := map[string]any{"$defs": doubling(40), "$ref": "#/$defs/d40"}
	err := validateIn(t, Document{Fields: map[string]any{"import x": sch}}, "import x", 1)
	wantError(t, err, "import x: invalid schema", "more than 100000 subschemas", "MaxExpandedSchemas")

	// Local types refer to each other the same way.
	types := map[string]any{"t0": map[string]any{"type": "integer"}}
	for i := 1; i <= 40; i++ {
		prev := map[string]any{"$ref": fmt.Sprintf("local://t%d", i-1)}
		types[fmt.Sprintf("t%d", i)] = map[string]any{"anyOf": []any{prev, prev}}
	}
	doc := Document{LocalTypes: types, Fields: map[string]any{"import y": map[string]any{"$ref": "local://t40"}}}
	wantError(t, validateIn(t, doc, "import y", 1), "MaxExpandedSchemas")

	// Smaller ones of the same shape work.
	small := map[string]any{"$defs": doubling(10), "$ref": "#/$defs/d10"}
	if err := validateIn(t, Document{Fields: map[string]any{"import z": small}}, "import z", 1); err != nil {
		t.Fatal(err)
	}
}

func TestDeepReferenceChainIsRefused(t *testing.T) {
	defs := map[string]any{"d0": map[string]any{"type": "integer"}}
	for i := 1; i <= MaxSchemaDepth+10; i++ {
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"allOf": []any{map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i-1)}}}
	}
	sch := map[string]any{"$defs": defs, "$ref": fmt.Sprintf("#/$defs/d%d", MaxSchemaDepth+10)}
	err := validateIn(t, Document{Fields: map[string]any{"import x": sch}}, "import x", 1)
	wantError(t, err, "import x: invalid schema", "more than 500 levels deep", "MaxSchemaDepth")
}

// A recursive schema that applies itself twice to each level of the value
// doubles the work with every level: it is refused for a value deep enough,
// before the library starts, and works for a shallow one.
func TestValidationStepsAreLimited(t *testing.T) {
	node := map[string]any{"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/n"}}, "type": "object"}
	sch := map[string]any{"$defs": map[string]any{"n": map[string]any{"allOf": []any{node, node}}}, "$ref": "#/$defs/n"}
	doc := Document{Fields: map[string]any{"import x": sch}}
	nested := func(depth int) any {
		v := map[string]any{}
		for range depth {
			v = map[string]any{"a": v}
		}
		return v
	}
	if err := validateIn(t, doc, "import x", nested(5)); err != nil {
		t.Fatal(err)
	}
	wantError(t, validateIn(t, doc, "import x", map[string]any{"a": 1}), "at /a: got number, want object")
	err := validateIn(t, doc, "import x", nested(40))
	wantError(t, err, "import x: validating the value would take more than 1000000 steps", "MaxValidationSteps")
}

// The reconcile's deadline ends the counting.
func TestValidationStopsAtTheDeadline(t *testing.T) {
	doc := Document{Fields: map[string]any{"import x": map[string]any{"items": map[string]any{"type": "integer"}}}}
	set, err := Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	list := make([]any, 10*ctxEvery)
	for i := range list {
		list[i] = i
	}
	wantError(t, set.Validate(ctx, "import x", list), "import x: the reconcile's render deadline was exceeded")
}

// A blueprint's schemas are compiled once, however often they validate, and
// found again by their content by a blueprint parsed anew.
func TestSchemasAreCompiledOnce(t *testing.T) {
	doc := func() Document {
		return Document{
			LocalTypes: map[string]any{"port": map[string]any{"type": "integer"}},
			Fields:     map[string]any{"import a": map[string]any{"$ref": "local://port"}, "import b": map[string]any{"type": "string", "title": t.Name()}},
		}
	}
	before := Compilations()
	for range 5 {
		if err := validateIn(t, doc(), "import a", 1); err != nil {
			t.Fatal(err)
		}
		if err := validateIn(t, doc(), "import b", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := Compilations() - before; n != 1 {
		t.Fatalf("compiled %d times, want once", n)
	}
	changed := doc()
	changed.LocalTypes["port"] = map[string]any{"type": "string"}
	wantError(t, validateIn(t, changed, "import a", 1), "got number, want string")
	if n := Compilations() - before; n != 2 {
		t.Fatalf("compiled %d times, want twice (a changed local type is another blueprint)", n)
	}
}
