package installation

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/terrace-dev/terrace/kit/flow"
)

// Messages quote errors of templates, mappings and schemas, which may quote
// the values they ran on, and whose length a tenant chooses. Each message is
// cut to its bound keeping its start (what failed) and its end (the bound
// and flag, or the way out), and never carries the value of an import read
// from a Secret.
const (
	// minRedacted is the shortest secret value redacted: a shorter one
	// would blank out ordinary words of every message.
	minRedacted = 4
)

// Redacted stands where a message quoted a secret value.
const Redacted = "[redacted]"

// secretValues are the values of an installation's imports read from
// Secrets (or from context copies of such imports): no message quotes them.
type secretValues []string

// add records the string leaves of v.
func (sv *secretValues) add(v any) {
	switch t := v.(type) {
	case string:
		if len(t) >= minRedacted {
			*sv = append(*sv, t)
		}
	case map[string]any:
		for _, e := range t {
			sv.add(e)
		}
	case []any:
		for _, e := range t {
			sv.add(e)
		}
	}
}

// redact replaces every secret value in msg, the longest first (a value
// may contain another).
func (sv secretValues) redact(msg string) string {
	if len(sv) == 0 {
		return msg
	}
	vals := append(secretValues(nil), sv...)
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		msg = strings.ReplaceAll(msg, v, Redacted)
		// A template or mapping error may quote a value in Go syntax,
		// escaped (%q): redact that form too.
		if q := quoted(v); q != v {
			msg = strings.ReplaceAll(msg, q, Redacted)
		}
	}
	return msg
}

// redactErr returns err with its message redacted, keeping its kind,
// reason and codes; nil stays nil.
func (sv secretValues) redactErr(err error) error {
	if err == nil || len(sv) == 0 {
		return err
	}
	msg := err.Error()
	clean := sv.redact(msg)
	if clean == msg {
		return err
	}
	var fe *flow.Error
	if errors.As(err, &fe) {
		// Err is dropped: its text holds the value.
		return &flow.Error{Kind: fe.Kind, Reason: fe.Reason, Message: clean, Codes: fe.Codes, Err: redactedCause{clean, err}}
	}
	return redactedCause{clean, err}
}

// redactedCause keeps errors.Is working through a redacted message (a
// render that found the process budget spent stays retried).
type redactedCause struct {
	msg   string
	cause error
}

func (e redactedCause) Error() string { return e.msg }
func (e redactedCause) Is(target error) bool {
	return errors.Is(e.cause, target)
}

// quoted is v as Go's %q writes it, without the quotes.
func quoted(v string) string {
	q := strconv.Quote(v)
	return q[1 : len(q)-1]
}
