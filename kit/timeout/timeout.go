// Package timeout is the timeout of Terrace's flags and of a deploy item's
// spec.timeout: a positive duration, or "none" for no timeout. It implements
// pflag.Value, so --progressing-timeout=none parses like
// --progressing-timeout=2m.
package timeout

import (
	"fmt"
	"strings"
	"time"
)

// None is the flag and spec.timeout value that disables a timeout.
const None = "none"

// Timeout is a duration that may be disabled with "none".
type Timeout struct {
	// Duration is the timeout; ignored when Disabled.
	Duration time.Duration
	// Disabled switches the check off.
	Disabled bool
}

// After returns an enabled timeout of d.
func After(d time.Duration) Timeout { return Timeout{Duration: d} }

// Disabled returns a switched-off timeout.
func Disabled() Timeout { return Timeout{Disabled: true} }

// Parse parses a Go duration or "none". Zero and negative durations are
// refused: they would fail every item at once, which is never what an
// operator means (use "none" to switch a check off).
func Parse(s string) (Timeout, error) {
	s = strings.TrimSpace(s)
	if s == None {
		return Disabled(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Timeout{}, fmt.Errorf("%q is neither a duration (e.g. 5m) nor %q", s, None)
	}
	if d <= 0 {
		return Timeout{}, fmt.Errorf("%q must be positive (use %q to disable)", s, None)
	}
	return After(d), nil
}

// Or is the timeout's duration, def when it is unset (zero: a Timeout in a
// struct built without its flag); ok is false when it is switched off.
func (t Timeout) Or(def time.Duration) (d time.Duration, ok bool) {
	switch {
	case t.Disabled:
		return 0, false
	case t.Duration <= 0:
		return def, true
	default:
		return t.Duration, true
	}
}

// String renders the timeout as Parse reads it.
func (t *Timeout) String() string {
	if t == nil {
		return ""
	}
	if t.Disabled {
		return None
	}
	return t.Duration.String()
}

// Set implements pflag.Value.
func (t *Timeout) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Type implements pflag.Value.
func (t *Timeout) Type() string { return "duration|none" }
