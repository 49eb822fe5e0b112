package tmpl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// These tests cover ways around the render's limits: values decoded from a
// string, methods called on values, printf's widths over lists, and
// text/template's own builtins.

// decodedTemplate decodes an 800 KB JSON list of 100 000 one-key maps
// (35 MB in memory) eight times and keeps the results.
func decodedTemplate(fn string) string {
	return `{{ $s := printf "[%s{\"a\":0}]" (repeat 99999 "{\"a\":0},") }}{{ $l := list }}` +
		`{{ range until 8 }}{{ $l = append $l (` + fn + ` $s) }}{{ end }}a: {{ len $l }}`
}

// A decoder's result is charged all it holds, not its top level: the eight
// decodes kept 295 MB and the render succeeded. Now the second decode does
// not fit in the budget: what fromJson would allocate meanwhile (json.go,
// 59 MB) is more than the first one's result (charged 36 MB) left of it;
// fromYaml is refused before the first, what it would allocate meanwhile
// (yaml.go) being more than the budget.
func TestDecodedValuesAreChargedWhole(t *testing.T) {
	for _, fn := range []string{"fromJson", "mustFromJson", "fromYaml"} {
		t.Run(fn, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(decodedTemplate(fn), nil) })
			wantRenderError(t, err, fn+" would allocate about")
			if left := heldLeft(t, err); fn != "fromYaml" && left > MaxRenderBytes-30_000_000 {
				t.Errorf("%d bytes were left of the budget after the first decode; its result was not charged whole", left)
			}
			// Two decodes' work; eight took 350 MB (JSON) and
			// 1.4 GB (YAML).
			if limit := uint64(150 << 20); n > limit {
				t.Errorf("the render allocated %d bytes; want less than %d", n, limit)
			}
		})
	}
	// Smaller documents decode as before.
	out, err := render(`{{ $d := fromJson "{\"a\":[1,\"x\",{\"b\":null}]}" }}{{ $y := fromYaml "k: [1, 2]" }}a: '{{ toJson $d }}'
b: '{{ toJson $y }}'`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out["a"] != `{"a":[1,"x",{"b":null}]}` || out["b"] != `{"k":[1,2]}` {
		t.Errorf("out = %v", out)
	}
}

// decodedSize estimates the memory decoded values keep: at least 90% of
// what the heap holds after decoding them (measured on Go 1.26; a smaller
// estimate lets templates keep more than the budget).
func TestDecodedSizeEstimatesTheHeap(t *testing.T) {
	for name, item := range map[string]string{
		"small maps": `{"a":12345.5},`, "maps of nine": `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1},`,
		"numbers": `1.5,`, "strings": `"ab",`, "lists": `[1.5],`, "empty maps": `{},`,
	} {
		doc := "[" + strings.TrimSuffix(strings.Repeat(item, 400000/len(item)), ",") + "]"
		var v any
		kept := retained(func() any {
			v = mustDecode(t, doc)
			return v
		})
		if est := decodedSize(reflect.ValueOf(v), unlimited); est < kept*9/10 {
			t.Errorf("%s: decodedSize = %d, the heap kept %d", name, est, kept)
		}
	}
}

// A function's result has no methods a template could call but those that
// print it (stand-ins, methods.go): text/template calls any method of any
// value, beyond the budget and the deadline (`(now).Format $s` with a
// layout of 1 MB in a range of 300 took 375 MB).
func TestFunctionsReturnNoMethods(t *testing.T) {
	for name, fn := range funcs(&budget{}) {
		ty := reflect.TypeOf(fn)
		if ty.Kind() != reflect.Func || ty.NumOut() == 0 {
			continue
		}
		out := ty.Out(0)
		// text/template takes the value out of a reflect.Value (index):
		// a part of a value the template holds.
		if out.Kind() == reflect.Interface || standIns[out] || out == reflect.TypeFor[reflect.Value]() {
			continue
		}
		if out.NumMethod() > 0 || reflect.PointerTo(out).NumMethod() > 0 {
			t.Errorf("%s returns %v, which has methods", name, out)
		}
	}
	for _, tpl := range []string{
		`a: {{ (now).Format "2006" }}`,
		`{{ $t := now }}a: {{ $t.Format "2006" }}`,
		`a: {{ with now }}{{ .Format "2006" }}{{ end }}`,
		`a: {{ (toDate "2006" "2020").AddDate 1 0 0 }}`,
		`a: {{ (mustToDate "2006" "2020").Format "2006" }}`,
		`a: {{ (dateModify "1h" now).Format "2006" }}`,
		`a: {{ (first (list now)).Format "2006" }}`,
		`a: {{ (index (list now) 0).Format "2006" }}`,
		`a: {{ (semver "1.0.0").SetMetadata "x" }}`,
	} {
		_, err := render(tpl, nil)
		wantRenderError(t, err, "can't evaluate field")
	}
	var err error
	n := allocated(func() {
		_, err = render(`{{ $s := repeat 1000000 "1" }}{{ $l := list }}{{ range until 300 }}{{ $l = append $l ((now).Format $s) }}{{ end }}a: 1`, nil)
	})
	wantRenderError(t, err, "can't evaluate field Format")
	if n > 8<<20 {
		t.Errorf("the render allocated %d bytes; want less than 8 MiB", n)
	}
}

// Times and versions print, encode and go into the date functions exactly
// as sprig's did.
func TestStandInsWorkAsBefore(t *testing.T) {
	tpl := `{{ $t := toDate "2006-01-02T15:04:05Z07:00" "2021-03-04T05:06:07+02:00" }}{{ $v := semver "v1.2.3-rc.1+b7" }}` +
		`a: "{{ $t }}|{{ date "2006-01-02 15:04" $t }}|{{ dateInZone "15:04 MST" $t "UTC" }}|{{ date_in_zone "15" $t "UTC" }}` +
		`|{{ htmlDate $t }}|{{ htmlDateInZone $t "UTC" }}|{{ unixEpoch $t }}|{{ toJson $t }}|{{ toYaml (dict "t" $t) }}` +
		`|{{ typeOf $t }}|{{ kindOf $t }}|{{ typeIs "time.Time" $t }}|{{ typeIsLike "time.Time" $t }}|{{ kindIs "struct" $t }}` +
		`|{{ dateModify "1h" $t | date "15" }}|{{ date_modify "-1h" $t | unixEpoch }}|{{ mustDateModify "2h" $t }}|{{ must_date_modify "3h" $t }}` +
		`|{{ toString $t }}|{{ printf "%v %s" $t $t }}|{{ print $t }}|{{ list $t }}|{{ eq $t $t }}|{{ mustToDate "2006" "2020" | unixEpoch }}` +
		`|{{ $v }}|{{ $v.Major }}.{{ $v.Minor }}.{{ $v.Patch }}-{{ $v.Prerelease }}+{{ $v.Metadata }} {{ $v.Original }} {{ $v.String }}` +
		`|{{ toJson $v }}|{{ toJson (list $t $v) }}|{{ deepCopy $t }}|{{ deepCopy (list $t (dict "v" 1 "l" (list $t))) }}|{{ mustDeepCopy (list $t) }}|{{ now | date "2006" | len }}|{{ durationRound "2h" }}"`
	b := &budget{}
	ours := template.Must(template.New("x").Funcs(funcs(b)).Parse(tpl))
	var got bytes.Buffer
	b.reset(context.Background(), &limitedWriter{w: &got, left: MaxOutputBytes})
	defer b.finish()
	if err := ours.Execute(&got, nil); err != nil {
		t.Fatal(err)
	}
	sprigOnly := template.Must(template.New("x").Funcs(sprig.TxtFuncMap()).Funcs(template.FuncMap{"toYaml": funcs(b)["toYaml"]}).Parse(tpl))
	var want bytes.Buffer
	b.finish()
	b.reset(context.Background(), &limitedWriter{w: io.Discard, left: MaxOutputBytes})
	if err := sprigOnly.Execute(&want, nil); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("got   %q\nsprig %q", got.String(), want.String())
	}
}

// printf pads every element of a list or map with its width, not the
// operand once: `printf "%100000v" (until 200)` built 20 MB (87 MB
// allocated) before its result was refused; over `until 10000` with a width
// of a million it would be 10 GB (not tried here: without the check it
// would exhaust the machine's memory).
func TestPrintfWidthsCountEveryElement(t *testing.T) {
	cases := []string{
		`a: {{ printf "%100000v" (until 200) | len }}`,
		`a: {{ printf "%100000d" (until 200) | len }}`,
		`a: {{ printf "%1000000v" (until 3) | len }}`,
		`a: {{ printf "%.100000f" (list 1.0 2.0 3.0 4.0 5.0 6.0 7.0 8.0 9.0 10.0 11.0) | len }}`,
		`a: {{ printf "%*v" 100000 (until 11) | len }}`,
		`{{ $d := dict }}{{ range $i := until 6 }}{{ $_ := set $d (print $i) $i }}{{ end }}a: {{ printf "%100000v" $d | len }}`,
		`{{ $u := until 4 }}a: {{ printf "%100000v" (list $u $u $u) | len }}`,
		`a: {{ printf "%s %100000v" "x" (list (list 1 2 3 4 5 6) (dict "k" (list 1 2 3 4 5))) | len }}`,
	}
	for _, tpl := range cases {
		t.Run(tpl, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = render(tpl, nil) })
			wantRenderError(t, err, "printf would return more than 1048576 bytes")
			if n > 4<<20 {
				t.Errorf("the render allocated %d bytes before it failed; want less than 4 MiB", n)
			}
		})
	}
	// Within the limit, printf prints as fmt does.
	out, err := render(`a: "{{ printf "%3v|%-3d|%5v|%x|%6.2f" (list 1 2) (list 3) (dict "k" "v") (list "ab") (list 1.5) }}"`, nil)
	if err != nil || out["a"] != "[  1   2]|[3  ]|map[    k:    v]|[6162]|[  1.50]" {
		t.Errorf("out = %q, err = %v", out["a"], err)
	}
}

// A loop whose body calls only text/template's builtins (lt, le, gt, ge,
// index, len, not), which are no functions of the FuncMap, stops at the
// deadline too: every iteration checks it (and the error does not name the
// inserted check, terraceTick, which it did). Such a loop ran on (2000 iterations of fifty `lt` of two
// equal 1 MB strings took 6.4 s with a deadline of 5 s).
func TestBuiltinsStopAtTheDeadline(t *testing.T) {
	defer func(old time.Duration) { timeout = old }(timeout)
	timeout = 30 * time.Millisecond
	setup := `{{ $a := repeat 1000000 "x" }}{{ $b := repeat 1000000 "x" }}{{ $m := dict $a 1 }}{{ $x := 0 }}`
	for name, call := range map[string]string{
		"lt": "lt $a $b", "le": "le $a $b", "gt": "gt $a $b", "ge": "ge $a $b", "index": "index $m $b",
	} {
		t.Run(name, func(t *testing.T) {
			tpl := setup + `{{ range until 2000 }}` + strings.Repeat(`{{ $x = `+call+` }}`, 50) + `{{ end }}a: 1`
			_, err := render(tpl, nil)
			wantRenderError(t, err, "the template ran longer than 30ms")
		})
	}
	// len and not take no time of their own, but a loop of nothing but
	// them checked no deadline either (these ran 6 to 7 s).
	for _, call := range []string{"len $a", "not $a"} {
		t.Run(call, func(t *testing.T) {
			tpl := setup + `{{ range until 10000 }}` + strings.Repeat(`{{ $x = `+call+` }}`, 500) + `{{ end }}a: 1`
			_, err := render(tpl, nil)
			wantRenderError(t, err, "the template ran longer than 30ms")
		})
	}
}

// retained is the heap that what f returns keeps.
func retained(f func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func mustDecode(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
