package bytesize

import (
	"strings"
	"testing"
)

func TestFlag(t *testing.T) {
	n := int64(64 << 20)
	f := Flag(&n)
	if f.String() != "64Mi" || f.Type() != "quantity" {
		t.Errorf("String %q, Type %q", f.String(), f.Type())
	}
	for in, want := range map[string]int64{"16Mi": 16 << 20, "500k": 500_000, "1048576": 1 << 20} {
		if err := f.Set(in); err != nil || n != want {
			t.Errorf("Set(%q): %d, %v; want %d", in, n, err, want)
		}
	}
	before := n // the count the last accepted value set (map order varies)
	for in, want := range map[string]string{
		"lots": `"lots" is not a byte quantity such as 64Mi`,
		"0":    `"0" is not a positive byte count`,
		"-1Mi": `"-1Mi" is not a positive byte count`,
		"0.5":  `"0.5" is not a positive byte count`,
	} {
		if err := f.Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q): %v, want an error containing %q", in, err, want)
		}
	}
	if n != before {
		t.Errorf("a refused value changed the count from %d to %d", before, n)
	}
}
