package mapping

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Expressions that would allocate or compute without bound fail with a clear
// error instead. The over-limit sizes are modest (a few MiB, a few million
// steps) so that the test stays cheap without the limits too.
func TestLimits(t *testing.T) {
	vars := map[string]any{"s": strings.Repeat("x", 1000)}
	cases := map[string]struct{ expr, want string }{
		"lists.range":   {`lists.range(20000).size()`, "lists.range: size 20000 exceeds maximum allowed (10000)"},
		"cost":          {`lists.range(2000).map(i, lists.range(1000).map(j, j * i)).size()`, "cost limit exceeded"},
		"join":          {`lists.range(3000).map(i, imports.s).join(imports.s).size()`, "join would return more than 1048576 bytes"},
		"join no sep":   {`lists.range(3000).map(i, imports.s).join().size()`, "join would return more than 1048576 bytes"},
		"replace":       {`imports.s.replace("x", imports.s + imports.s).size()`, "replace would return 2000000 bytes, more than the limit of 1048576"},
		"replace n":     {`imports.s.replace("x", imports.s + imports.s, 2000).size()`, "replace would return 2000000 bytes"},
		"replace empty": {`imports.s.replace("", imports.s + imports.s).size()`, "replace would return 2003000 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Evaluate(celMappings(t, map[string]string{"m": tc.expr}), ImportsVar, vars)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `data mapping "m"`) {
				t.Fatalf("out = %v, err = %v; want an error containing %q", out, err, tc.want)
			}
		})
	}
}

// A long loop that CEL's cost model does not charge for is interrupted once
// evaluation has run for the timeout.
func TestTimeout(t *testing.T) {
	defer func(d time.Duration) { timeout = d }(timeout)
	timeout = 10 * time.Millisecond
	out, err := Evaluate(celMappings(t, map[string]string{"m": `lists.range(3000).all(i, lists.range(3000).all(j, true))`}), ImportsVar, nil)
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("out = %v, err = %v; want an interrupted evaluation", out, err)
	}
}

// Within the limits, the replaced join and replace behave like ext.Strings'.
func TestBoundedStringFunctions(t *testing.T) {
	cases := map[string]any{
		`["a", "b"].join("-")`:              "a-b",
		`["a", "b"].join()`:                 "ab",
		`[].join(",")`:                      "",
		`"a-b-c".replace("-", "+")`:         "a+b+c",
		`"a-b-c".replace("-", "+", 1)`:      "a+b-c",
		`"abc".replace("", "-")`:            "-a-b-c-",
		`"aaa".replace("a", "")`:            "",
		`lists.range(3).map(i, "x").join()`: "xxx",
	}
	for expr, want := range cases {
		out, err := Evaluate(celMappings(t, map[string]string{"m": expr}), ImportsVar, nil)
		if err != nil || out["m"] != want {
			t.Errorf("%s = %v, %v; want %q", expr, out["m"], err, want)
		}
	}
}

// The reconcile's deadline stops a mapping long before Timeout would.
func TestReconcileDeadlineStopsMappings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	exprs := map[string]string{"a": `lists.range(3000).all(i, lists.range(3000).all(j, true))`, "b": `1`}
	out, err := EvaluateContext(ctx, celMappings(t, exprs), ImportsVar, nil)
	if !errors.Is(err, ErrRenderDeadline) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), `data mapping "a"`) || !strings.Contains(err.Error(), "the reconcile's render deadline was exceeded") {
		t.Fatalf("out = %v, err = %v; want the reconcile's deadline", out, err)
	}
}
