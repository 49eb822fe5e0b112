package tmpl

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// split and splitn build a map whose keys, slots and table cost about 100
// bytes a part; the budget saw 32. A 1 MiB string split at every byte took
// 111 MB and was charged 32 MB; now it is refused before it is built, and a
// loop keeping splits runs out of budget as its real size says.
func TestSplitIsChargedItsRealSize(t *testing.T) {
	cases := map[string]struct{ tpl, want string }{
		"split":  {`{{ $m := split "" (repeat 1000000 "x") }}a: {{ len $m }}`, "split would take 88000000 bytes, more than the 66108864 left of the template's budget of 67108864 bytes"},
		"splitn": {`{{ $m := splitn "," -1 (repeat 1000000 ",") }}a: {{ len $m }}`, "splitn would take 88000088 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tc.tpl, nil) })
			wantRenderError(t, err, tc.want)
			if n > 8<<20 {
				t.Errorf("the render allocated %d bytes before it failed; want less than 8 MiB", n)
			}
		})
	}
	// Ten splits of 100 001 parts each take about 100 MB (charged 32 MB
	// before): the budget runs out on the way.
	keep := `{{ $l := list }}{{ range until 10 }}{{ $l = append $l (split "," (repeat 100000 "x,")) }}{{ end }}a: {{ len $l }}`
	var err error
	n := allocated(func() { _, err = render(keep, nil) })
	wantRenderError(t, err, "split would take")
	if n > 80<<20 {
		t.Errorf("the render allocated %d bytes before it failed; want less than the budget", n)
	}
}

// Within the budget split, splitn and splitList return what sprig's do.
func TestSplitsAsSprig(t *testing.T) {
	orig := sprig.TxtFuncMap()
	ours := funcs(&budget{left: MaxRenderBytes, deadline: time.Now().Add(time.Minute)})
	call := func(f any, args ...any) any {
		in := make([]reflect.Value, len(args))
		for i, a := range args {
			in[i] = reflect.ValueOf(a)
		}
		return reflect.ValueOf(f).Call(in)[0].Interface()
	}
	for _, s := range []string{"", "a", "a,b,,c", ",", "ä,ö,ü", strings.Repeat("x,", 1000)} {
		for _, sep := range []string{",", "", ",,", "ö"} {
			if got, want := call(ours["split"], sep, s), call(orig["split"], sep, s); !reflect.DeepEqual(got, want) {
				t.Errorf("split %q %.20q = %.100v, want %.100v", sep, s, got, want)
			}
			if got, want := call(ours["splitList"], sep, s), call(orig["splitList"], sep, s); !reflect.DeepEqual(got, want) {
				t.Errorf("splitList %q %.20q = %.100v, want %.100v", sep, s, got, want)
			}
			for _, n := range []int{-1, 0, 1, 2, 5} {
				if got, want := call(ours["splitn"], sep, n, s), call(orig["splitn"], sep, n, s); !reflect.DeepEqual(got, want) {
					t.Errorf("splitn %q %d %.20q = %.100v, want %.100v", sep, n, s, got, want)
				}
			}
		}
	}
}

// uniq compared every element with every element kept (10 000 numbers:
// 5·10⁷ comparisons, 2.4 s in one call, which the render's deadline cannot
// interrupt), and without every element with every value to omit. They find
// equal values through a hash now.
func TestUniqAndWithoutAreNotQuadratic(t *testing.T) {
	omit := make([]string, 5000)
	for i := range omit {
		omit[i] = fmt.Sprint(i * 2)
	}
	strs := make([]any, 20000)
	lists := make([]any, 10000)
	for i := range strs {
		strs[i] = fmt.Sprint("s", i%10000)
	}
	for i := range lists {
		lists[i] = []any{float64(i % 5000), "x"}
	}
	values := map[string]any{"strings": strs, "lists": lists}
	cases := map[string]struct {
		tpl  string
		want any
	}{
		"uniq numbers":      {`a: {{ uniq (until 10000) | len }}`, float64(10000)},
		"uniq strings":      {`a: {{ uniq .strings | len }}`, float64(10000)},
		"mustUniq of lists": {`a: {{ mustUniq .lists | len }}`, float64(5000)},
		"without":           {`a: {{ without (until 10000) ` + strings.Join(omit, " ") + ` | len }}`, float64(5000)},
	}
	// Counted, not timed: sprig compares every element with every kept one
	// (n²/2, some 10⁷–10⁸ comparisons here, seconds); the hash compares an
	// element only with kept ones of its hash, about once per duplicate.
	var comparisons int
	deepEqual = func(x, y any) bool { comparisons++; return reflect.DeepEqual(x, y) }
	t.Cleanup(func() { deepEqual = reflect.DeepEqual })
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comparisons = 0
			out, err := render(tc.tpl, values)
			if err != nil {
				t.Fatal(err)
			}
			if out["a"] != tc.want {
				t.Errorf("a = %v, want %v", out["a"], tc.want)
			}
			if comparisons > 20000 {
				t.Errorf("%d comparisons of elements, want at most one per element of the list", comparisons)
			}
		})
	}
}

// uniq, without and has decide like sprig's: reflect.DeepEqual, the first
// of equal elements kept, in order.
func TestUniqWithoutHasAsSprig(t *testing.T) {
	orig := sprig.TxtFuncMap()
	ours := funcs(&budget{left: MaxRenderBytes, deadline: time.Now().Add(time.Minute)})
	nan := math.NaN()
	shared := []any{nan, "x"}
	sharedMap := map[string]any{"n": nan}
	lists := [][]any{
		nil,
		{},
		{1, 2, 1, 3, 2, 1},
		{"a", "b", "a", 1, int64(1), 1.0, uint(1), true, false, true, nil, nil},
		{0.0, math.Copysign(0, -1), nan, nan, 1.5, 1.5},
		{[]any{1, "a"}, []any{1, "a"}, []any{"a", 1}, []any{}, []any(nil), []any{}, []int{1}, []int{1}},
		{map[string]any{"a": 1, "b": []any{2}}, map[string]any{"b": []any{2}, "a": 1}, map[string]any{"a": 2}, map[string]any(nil), map[string]any{}},
		{shared, shared, []any{nan, "x"}, []any{shared}, []any{shared}, sharedMap, sharedMap, map[string]any{"n": nan}},
		{[]byte("ab"), []byte("ab"), "ab", [2]int{1, 2}, [2]int{1, 2}},
	}
	type result struct {
		V   any
		Err string
	}
	call := func(f any, args ...any) result {
		var r result
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.Err = fmt.Sprint(p)
				}
			}()
			in := make([]reflect.Value, len(args))
			for i, a := range args {
				in[i] = reflect.ValueOf(&a).Elem()
			}
			out := reflect.ValueOf(f).Call(in)
			r.V = out[0].Interface()
			if len(out) == 2 && !out[1].IsNil() {
				r.Err = out[1].Interface().(error).Error()
			}
		}()
		return r
	}
	same := func(what string, got, want result) {
		t.Helper()
		if got.Err != want.Err || !reflect.DeepEqual(got.V, want.V) && fmt.Sprint(got.V) != fmt.Sprint(want.V) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	for _, l := range lists {
		if l == nil {
			continue
		}
		same(fmt.Sprintf("uniq %v", l), call(ours["uniq"], l), call(orig["uniq"], l))
		same(fmt.Sprintf("mustUniq %v", l), call(ours["mustUniq"], l), call(orig["mustUniq"], l))
		for _, omit := range lists {
			same(fmt.Sprintf("without %v %v", l, omit), call(ours["mustWithout"], append([]any{l}, omit...)...), call(orig["mustWithout"], append([]any{l}, omit...)...))
		}
		for _, needle := range l {
			same(fmt.Sprintf("has %v %v", needle, l), call(ours["has"], needle, l), call(orig["has"], needle, l))
		}
	}
	// Not a list.
	same("mustUniq 1", call(ours["mustUniq"], 1), call(orig["mustUniq"], 1))
	same("mustWithout 1", call(ours["mustWithout"], 1), call(orig["mustWithout"], 1))
	same("mustHas 1 1", call(ours["mustHas"], 1, 1), call(orig["mustHas"], 1, 1))
	same("has 1 nil", call(ours["has"], 1, nil), call(orig["has"], 1, nil))
}

// uniq and has check the render's deadline as they go, not only before
// they start: one call over a large list stops at the deadline.
func TestListFunctionsStopAtTheDeadline(t *testing.T) {
	defer func(old time.Duration) { timeout = old }(timeout)
	// Each call takes tens of milliseconds (measuring its arguments alone
	// several): at a deadline of 20 ms, one sometimes finished in time on a
	// busy machine and the test failed. Without the checks inside the
	// calls, they return and the render fails at the next action, without
	// "error calling".
	timeout = time.Millisecond
	// Half a million strings, each compared in full with the needle.
	long := strings.Repeat("x", 64)
	haystack := make([]any, 500000)
	for i := range haystack {
		haystack[i] = long + "0"
	}
	values := map[string]any{"haystack": haystack, "needle": long + "1"}
	for name, tpl := range map[string]string{
		"has":  `a: {{ has .needle .haystack }}`,
		"uniq": `a: {{ uniq .haystack | len }}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(tpl, values)
			wantRenderError(t, err, "error calling "+name+": the template ran longer than 1ms")
		})
	}
}
