package tmpl

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestLargeRenderHookFiresOnceForLargeRenders: a render that comes to hold
// the threshold of the process budget calls the hook once, however much
// more it grows; a small render never does; the hook's error fails the
// render.
func TestLargeRenderHookFiresOnceForLargeRenders(t *testing.T) {
	const threshold = 2 << 20
	large := Source{Execution: "large", Template: `x: {{ range until 3 }}{{ repeat 1000000 "x" }}{{ end }}`}
	small := Source{Execution: "small", Template: `x: {{ .a }}`}

	fired := 0
	ctx := WithLargeRenderHook(context.Background(), threshold, func() error { fired++; return nil })
	if _, err := ExecuteContext(ctx, small, map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if fired != 0 {
		t.Fatalf("a small render fired the hook %d times", fired)
	}
	if _, err := ExecuteContext(ctx, large, nil); err != nil {
		t.Fatal(err)
	}
	if fired != 1 {
		t.Fatalf("a large render fired the hook %d times, want once", fired)
	}

	refused := errors.New("cannot mark the render")
	ctx = WithLargeRenderHook(context.Background(), threshold, func() error { return refused })
	if _, err := ExecuteContext(ctx, large, nil); err == nil || !strings.Contains(err.Error(), refused.Error()) {
		t.Fatalf("the hook's error did not fail the render: %v", err)
	}
}
