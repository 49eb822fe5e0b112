package mapping

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var spiffVars = map[string]any{
	"a":     "x",
	"b":     "y",
	"n":     float64(3),
	"half":  float64(1.5),
	"flag":  true,
	"empty": nil,
	"cfg":   map[string]any{"host": "h", "ports": []any{float64(80), float64(443)}, "my-key": "dash"},
	"list":  []any{float64(1), float64(2)},
}

// evalOne evaluates one mapping value given as JSON.
func evalOne(t *testing.T, value string) (any, error) {
	t.Helper()
	m, err := Parse(map[string][]byte{"m": []byte(value)})
	if err != nil {
		return nil, err
	}
	out, err := Evaluate(m, ImportsVar, spiffVars)
	if err != nil {
		return nil, err
	}
	return out["m"], nil
}

func TestSpiffExpressions(t *testing.T) {
	cases := map[string]struct {
		expr string
		want any
	}{
		"reference":             {`a`, "x"},
		"field path":            {`cfg.host`, "h"},
		"field with dash":       {`cfg.my-key`, "dash"},
		"index with dot":        {`cfg.ports.[1]`, float64(443)},
		"index attached":        {`cfg.ports[0]`, float64(80)},
		"whole map":             {`cfg.ports`, []any{float64(80), float64(443)}},
		"concatenation":         {`a "-" b`, "x-y"},
		"concat number":         {`a n`, "x3"},
		"concat lists":          {`list [3]`, []any{float64(1), float64(2), float64(3)}},
		"default when missing":  {`missing || "fallback"`, "fallback"},
		"default missing field": {`cfg.nope || 7`, float64(7)},
		"default missing index": {`list.[5] || 0`, float64(0)},
		"default when nil":      {`empty || "d"`, "d"},
		"no default needed":     {`a || "fallback"`, "x"},
		"addition":              {`n + 2`, float64(5)},
		"subtraction":           {`n - 5`, float64(-2)},
		"multiplication":        {`n * 4`, float64(12)},
		"division":              {`7 / 2`, float64(3)},
		"modulo":                {`7 % n`, float64(1)},
		"float arithmetic":      {`half * 2`, float64(3)},
		"precedence":            {`1 + 2 * 3`, float64(7)},
		"parentheses":           {`(1 + 2) * 3`, float64(9)},
		"negative literal":      {`-4 + n`, float64(-1)},
		"equal":                 {`n == 3`, true},
		"equal strings":         {`a == "x"`, true},
		"not equal":             {`a != b`, true},
		"less":                  {`n < 3`, false},
		"less or equal":         {`n <= 3`, true},
		"greater":               {`n > 2`, true},
		"greater or equal":      {`a >= "y"`, false},
		"not":                   {`!flag`, false},
		"and":                   {`flag -and n > 2`, true},
		"or":                    {`n > 5 -or flag`, true},
		"conditional":           {`flag ? "on" : "off"`, "on"},
		"string literal":        {`"a \"q\"\n"`, "a \"q\"\n"},
		"int literal":           {`42`, float64(42)},
		"float literal":         {`2.5`, 2.5},
		"bool literal":          {`false`, false},
		"nil literal":           {`nil`, nil},
		"tilde nil":             {`~`, nil},
		"list literal":          {`[1, a, [true]]`, []any{float64(1), "x", []any{true}}},
		"empty list":            {`[]`, []any{}},
		"map literal":           {`{ "k" = a, "n" = n + 1 }`, map[string]any{"k": "x", "n": float64(4)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, _ := json.Marshal("(( " + tc.expr + " ))")
			got, err := evalOne(t, string(b))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("(( %s )) = %#v, want %#v", tc.expr, got, tc.want)
			}
		})
	}
}

// Literals of every type pass through unchanged, nested maps and lists keep
// their shape, and only strings that are exactly `(( … ))` are evaluated.
func TestSpiffValueWalk(t *testing.T) {
	in := `{"s": "plain (( text ))", "i": 7, "f": 1.25, "t": true, "z": null, "e": "((! a ))",
		"l": ["lit", 2, "(( a ))", {"deep": ["(( n * 2 ))"]}], "m": {"host": "(( cfg.host ))", "x": {}}}`
	got, err := evalOne(t, in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"s": "plain (( text ))", "i": float64(7), "f": 1.25, "t": true, "z": nil, "e": "(( a ))",
		"l": []any{"lit", float64(2), "x", map[string]any{"deep": []any{float64(6)}}},
		"m": map[string]any{"host": "h", "x": map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
	for _, lit := range []string{`12`, `true`, `null`, `[1, "a"]`, `{"k": [null]}`} {
		got, err := evalOne(t, lit)
		var want any
		_ = json.Unmarshal([]byte(lit), &want)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, %v", lit, got, err)
		}
	}
}

// A missing import fails with its name; a missing field names its path.
func TestSpiffMissingReference(t *testing.T) {
	_, err := evalOne(t, `{"k": ["(( a \"-\" nosuch ))"]}`)
	var merr *Error
	if !errors.As(err, &merr) || merr.Name != "m" || merr.Path != ".k[0]" ||
		!strings.Contains(err.Error(), `import "nosuch" is not defined`) || !strings.Contains(err.Error(), "at offset 9") {
		t.Fatalf("got %v", err)
	}
	_, err = evalOne(t, `"(( cfg.host.x ))"`)
	if err == nil || !strings.Contains(err.Error(), "cfg.host is a string, not a map") {
		t.Fatalf("got %v", err)
	}
}

// What the subset does not implement is refused where it is written, with
// its offset in the expression, instead of passing as a literal.
func TestSpiffOutsideTheSubset(t *testing.T) {
	cases := map[string]struct{ value, want string }{
		"merge":           {`"(( merge ))"`, `at offset 3: "merge" (merging with a stub) is Spiff that Terrace's data mappings do not support`},
		"function":        {`"(( stub() ))"`, `at offset 3: function calls (stub(…)) are not supported`},
		"function inside": {`"(( a \"-\" join(\",\", list) ))"`, `at offset 9: function calls (join(…))`},
		"projection":      {`"(( list.[*] ))"`, `at offset 9: only a non-negative integer may index a list`},
		"mapping":         {`"(( map[list|x|->x] ))"`, `at offset 11: unexpected character '|' (lambda and mapping expressions are not supported)`},
		"unknown char":    {`"(( a & b ))"`, `at offset 5: unexpected character '&'`},
		"double amp":      {`"(( a && b ))"`, "at offset 5: `&&` is not Spiff: write `-and`"},
		"unclosed paren":  {`"(( (a ))"`, `expected ")", found the end of the expression`},
		"dangling op":     {`"(( 1 + ))"`, `at offset 7: unexpected end of the expression`},
		"empty":           {`"((  ))"`, "empty expression"},
		"unterminated":    {`"(( a )"`, "a string starting with (( must end with ))"},
		"string + string": {`"(( a + b ))"`, "+ needs numbers, not a string and a string (strings are joined by juxtaposition"},
		"division by 0":   {`"(( n / 0 ))"`, "division by zero"},
		"bad not":         {`"(( !a ))"`, "! needs a boolean, not a string"},
		"bad map key":     {`"(( { 1 = 2 } ))"`, "a map key must be a string, not a number"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := evalOne(t, tc.value)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %#v, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
}

// Parse refuses, before anything is evaluated, an expression nested or
// sized past the limits, and a value nested past the limit.
func TestSpiffBounds(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1)
	if _, err := evalOne(t, `"(( `+deep+` ))"`); err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels, the limit") {
		t.Fatalf("deep expression: %v", err)
	}
	long, _ := json.Marshal("((" + strings.Repeat(`"x" `, MaxExpressionBytes/4+1) + "))")
	if _, err := evalOne(t, string(long)); err == nil || !strings.Contains(err.Error(), "more than the limit of 8192") {
		t.Fatalf("long expression: %v", err)
	}
	value := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	if _, err := evalOne(t, value); err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Fatalf("deep value: %v", err)
	}
	if _, err := evalOne(t, `"(( `+strings.Repeat("(", MaxDepth-2)+"1"+strings.Repeat(")", MaxDepth-2)+` ))"`); err != nil {
		t.Fatalf("nesting within the limit: %v", err)
	}
}

// Export mappings name exports in their errors.
func TestSpiffExportsKind(t *testing.T) {
	m := parse(t, map[string]string{"m": `"(( gone ))"`})
	if _, err := Evaluate(m, ExportsVar, nil); err == nil || !strings.Contains(err.Error(), `export "gone" is not defined`) {
		t.Fatalf("got %v", err)
	}
}

// A reconcile whose deadline has passed evaluates no Spiff mapping.
func TestSpiffStopsAtTheReconcileDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	m := parse(t, map[string]string{"m": `{"a": "(( n + 1 ))"}`})
	out, err := EvaluateContext(ctx, m, ImportsVar, spiffVars)
	if !errors.Is(err, ErrRenderDeadline) || !strings.Contains(err.Error(), `data mapping "m"`) {
		t.Fatalf("out = %v, err = %v; want the reconcile's deadline", out, err)
	}
}
