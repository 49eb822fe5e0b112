package flow

import (
	"errors"
	"fmt"
	"slices"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Kind says what a failure means for the user.
type Kind uint8

const (
	// Transient: retrying may help (an API error, an unreachable cluster).
	Transient Kind = iota
	// Waiting: another object must change first; its event brings the
	// reconcile back. Not a failure of this object.
	Waiting
	// Stalled: the configuration is wrong; retrying cannot help until the
	// user changes it.
	Stalled
)

func (k Kind) String() string {
	switch k {
	case Waiting:
		return "Waiting"
	case Stalled:
		return "Stalled"
	default:
		return "Transient"
	}
}

// Error is a failure with the fields status reports: the Ready reason, the
// lastError codes, and its kind. Message, when set, is what the user reads;
// otherwise the wrapped error's text.
type Error struct {
	Kind Kind
	// Reason is a CamelCase reason for the Ready condition, lastError and
	// the Event, e.g. InvalidConfiguration.
	Reason string
	// Message is the human-readable text; it names the field or object.
	Message string
	// Codes classify the error for lastError (e.g. ERR_TIMEOUT).
	Codes []lsv1alpha1.ErrorCode
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// WithCodes returns e with codes added.
func (e *Error) WithCodes(codes ...lsv1alpha1.ErrorCode) *Error {
	for _, c := range codes {
		if !slices.Contains(e.Codes, c) {
			e.Codes = append(e.Codes, c)
		}
	}
	return e
}

// StalledError: bad configuration, retrying cannot help. It carries
// ERR_CONFIGURATION_PROBLEM.
func StalledError(reason string, err error) *Error {
	return &Error{Kind: Stalled, Reason: reason, Err: err, Codes: []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}}
}

// Stalledf is StalledError with a formatted message.
func Stalledf(reason, format string, args ...any) *Error {
	return StalledError(reason, fmt.Errorf(format, args...))
}

// Waitingf: the reconcile waits for another object, named in the message.
func Waitingf(reason, format string, args ...any) *Error {
	return &Error{Kind: Waiting, Reason: reason, Err: fmt.Errorf(format, args...)}
}

// TransientError gives a retryable error a reason (and codes).
func TransientError(reason string, err error, codes ...lsv1alpha1.ErrorCode) *Error {
	return &Error{Kind: Transient, Reason: reason, Err: err, Codes: codes}
}

// KindOf is the kind of err: that of the first *Error in its chain,
// Transient for any other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Transient
}

// IsStalled reports whether err is a configuration problem.
func IsStalled(err error) bool { return err != nil && KindOf(err) == Stalled }

// IsWaiting reports whether err waits for another object.
func IsWaiting(err error) bool { return err != nil && KindOf(err) == Waiting }

// ReasonOf is err's reason, or fallback when it carries none.
func ReasonOf(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return fallback
}

// CodesOf is err's codes: those it carries, else ERR_CONFIGURATION_PROBLEM
// for a stalled error and ERR_INTERNAL_PROBLEM for any other.
func CodesOf(err error) []lsv1alpha1.ErrorCode {
	var e *Error
	if errors.As(err, &e) && len(e.Codes) > 0 {
		return slices.Clone(e.Codes)
	}
	if IsStalled(err) {
		return []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorConfigurationProblem}
	}
	return []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInternalProblem}
}
