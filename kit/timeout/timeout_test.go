package timeout

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Timeout{"5m": After(5 * time.Minute), " 90s ": After(90 * time.Second), "none": Disabled()} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := Parse(got.String()); err != nil || back != got {
			t.Errorf("Parse(%q.String()) = %v, %v", in, back, err)
		}
	}
	for _, bad := range []string{"0s", "-1m", "soon", "", "None"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestFlag(t *testing.T) {
	v := After(time.Minute)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Var(&v, "t", "")
	if err := fs.Parse([]string{"--t=none"}); err != nil || !v.Disabled {
		t.Fatalf("--t=none: %v, %+v", err, v)
	}
	if fs.Lookup("t").Value.Type() != "duration|none" {
		t.Errorf("type %q", fs.Lookup("t").Value.Type())
	}
}

// Or: the duration set, the default for an unset (zero) Timeout, off when
// switched off.
func TestOr(t *testing.T) {
	for _, c := range []struct {
		t      Timeout
		want   time.Duration
		wantOK bool
	}{
		{After(90 * time.Second), 90 * time.Second, true},
		{Timeout{}, time.Minute, true},
		{Disabled(), 0, false},
	} {
		if d, ok := c.t.Or(time.Minute); d != c.want || ok != c.wantOK {
			t.Errorf("%+v.Or(1m) = %v, %v; want %v, %v", c.t, d, ok, c.want, c.wantOK)
		}
	}
}
