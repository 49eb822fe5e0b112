package tmpl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// grownLength is the largest n up to limit at which appending the n-th
// element grows a list: there a decoded list has allocated the most slots
// per element (encoding/json appends them one by one).
func grownLength(limit int) int {
	var l []any
	n := 1
	for len(l) < limit {
		if len(l) == cap(l) {
			n = len(l) + 1
		}
		l = append(l, nil)
	}
	return n
}

// jsonShapes are JSON texts of about MaxStringBytes (the longest a template
// can build) of the shapes that cost fromJson the most per byte, per value
// or per object, and a few ordinary ones.
func jsonShapes() map[string]string {
	const size = MaxStringBytes
	list := func(item string) string {
		n := grownLength((size - 2) / (len(item) + 1))
		return "[" + strings.Repeat(item+",", n-1) + item + "]"
	}
	var bigMap strings.Builder
	bigMap.WriteString("{")
	for i := 0; bigMap.Len() < size-20; i++ {
		fmt.Fprintf(&bigMap, `"%x":1,`, i)
	}
	bigMap.WriteString(`"z":1}`)
	manifest := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default","labels":{"app":"demo"}},` +
		`"data":{"description":"How the thing is reconciled, see the docs.","replicas":"3"}}`
	str := func(s string) string { return `"` + s + `"` }
	return map[string]string{
		"numbers":           list("1"),
		"zeros":             list("0"),
		"nulls":             list("null"),
		"empty strings":     list(`""`),
		"escaped strings":   list(`"\n"`),
		"empty lists":       list("[]"),
		"one-element lists": list("[1]"),
		"nested lists":      list("[[[[1]]]]"),
		"empty maps":        list("{}"),
		"lists of maps":     list("[{}]"),
		"empty-key maps":    list(`{"":1}`),
		"one-key maps":      list(`{"a":1}`),
		"two-key maps":      list(`{"a":1,"b":1}`),
		"nine-key maps":     list(`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}`),
		"maps in maps":      list(`{"":{"":1}}`),
		"lists in maps":     list(`{"":[]}`),
		"strings in maps":   list(`{"":""}`),
		"escaped keys":      list(`{"\n":1}`),
		"invalid keys":      list("{\"\xff\":1}"),
		"invalid strings":   list("\"\xff\""),
		"map":               bigMap.String(),
		"deep lists":        strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		"deep maps":         strings.Repeat(`{"":`, 9999) + "1" + strings.Repeat("}", 9999),
		"long string":       str(strings.Repeat("x", size-2)),
		"escapes":           str(strings.Repeat(`\n`, (size-2)/2)),
		"unicode escapes":   str(strings.Repeat(`\u0001`, (size-2)/6)),
		"surrogates":        str(strings.Repeat(`\ud800`, (size-2)/6)),
		"non-ascii":         str(strings.Repeat("é", (size-2)/2)),
		"invalid utf-8":     str(strings.Repeat("\xff", size-2)),
		"one invalid byte":  str("\xff" + strings.Repeat("x", size-3)),
		// Just over half the bytes invalid UTF-8: the unquoted string
		// (each such byte becomes 3) just outgrows the buffer's second
		// size.
		"half invalid utf-8": str(strings.Repeat("\xffx", (size-42)/2) + strings.Repeat("\xff", 40)),
		"manifests":          "[" + strings.Repeat(manifest+",", size/(len(manifest)+1)) + "{}]",
		"spaces":             "[" + strings.Repeat(" ", size-3) + "1]",
	}
}

// TestJSONAllowancesCoverAllocations checks, for the costliest shapes found,
// that what fromJson allocates (TotalAlloc) stays within the allowance held
// for it, and logs the cost per unit the factors in json.go come from (go
// test -v).
func TestJSONAllowancesCoverAllocations(t *testing.T) {
	for name, s := range jsonShapes() {
		if !json.Valid([]byte(s)) {
			t.Fatalf("%s is no JSON", name)
		}
		allowance, what := fromJSONCost(s)
		var v any
		got := allocatedBytes(func() {
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Errorf("fromJson %s: %v", name, err)
			}
		})
		t.Logf("fromJson %-17s (%s): allocated %10d, %5.1f a byte; allowance %10d, %4.2f times", name, what, got,
			float64(got)/float64(len(s)), allowance, float64(allowance)/float64(got))
		if got > allowance {
			t.Errorf("fromJson %s allocated %d bytes, more than its allowance of %d", name, got, allowance)
		}
	}
}

// bytesLeft is the budget left that a "would allocate about" error names.
var bytesLeft = regexp.MustCompile(`more than the (\d+) bytes left`)

// fromJson and mustFromJson allocate, for a moment, more than they return:
// 1 MiB of `{"":1},` allocated 66 MB (and kept 53 MB), more than the whole
// budget, and the call ran however little of the budget was left; its result
// was refused only afterwards, if at all. A call that would allocate more than
// the budget left is refused before it runs (json.go).
func TestFromJSONIsRefusedBeforeItAllocates(t *testing.T) {
	maps := `{{ $s := printf "[%s{}]" (repeat 149795 "{\"\":1},") }}`
	numbers := `{{ $s := printf "[%s1]" (repeat 300000 "1,") }}`
	spent := `{{ $l := list }}{{ range until 40 }}{{ $l = append $l (repeat 1000000 "x") }}{{ end }}`
	for name, tc := range map[string]struct{ tpl, want string }{
		"fromJson of many maps": {
			maps + `{{ $v := fromJson $s }}a: {{ len $v }}`,
			"fromJson would allocate about 87780438 bytes while it runs (1048569 bytes of JSON, up to 449388 values and 149796 objects), more than the",
		},
		"mustFromJson of many maps": {
			maps + `{{ $v := mustFromJson $s }}a: {{ len $v }}`,
			"mustFromJson would allocate about",
		},
		// The result, 300 000 numbers (7.6 MB kept, charged 9.6 MB), fits
		// in the 27 MB left; decoding them allocated 31 MB.
		"fromJson with the budget partly spent": {
			spent + numbers + `{{ $v := fromJson $s }}a: {{ len $v }}`,
			"fromJson would allocate about 42000274 bytes while it runs (600003 bytes of JSON, up to 300002 values and 0 objects), more than the",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tc.tpl, nil) })
			wantRenderError(t, err, tc.want)
			// What the template built before the call: 2 MB, and
			// 41 MB in the last case (the calls allocated 67 MB and
			// 31 MB).
			if limit := uint64(48 << 20); n > limit {
				t.Errorf("the render allocated %d bytes; want less than %d", n, limit)
			}
		})
	}
	// Text that is not JSON is not held for (encoding/json refuses it before
	// it decodes): fromJson returns nil as before, mustFromJson its error.
	out, err := render(maps+`{{ $v := fromJson (print $s "]") }}a: {{ $v | toJson }}`, nil)
	if err != nil || out["a"] != nil {
		t.Errorf("fromJson of invalid text: out = %v, err = %v", out, err)
	}
	_, err = render(maps+`{{ $v := mustFromJson (print $s "]") }}a: 1`, nil)
	wantRenderError(t, err, "invalid character ']' after top-level value")
	// What a call held is given back when it returns: each decode below
	// holds more than half the budget (35 MB) and keeps 8 MB.
	out, err = render(`{{ $s := printf "[%s1]" (repeat 250000 "1,") }}{{ $l := list }}`+
		`{{ range until 3 }}{{ $l = append $l (fromJson $s) }}{{ end }}a: {{ len $l }}`, nil)
	if err != nil || out["a"] != float64(3) {
		t.Errorf("out = %v, err = %v", out, err)
	}
}

// heldLeft is the budget left that err, a "would allocate about" error,
// names.
func heldLeft(t *testing.T, err error) int64 {
	t.Helper()
	m := bytesLeft.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("err = %v; want it to name the bytes left", err)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
