package manager

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// rejectedEventMessage is the message client-go's event broadcasters
// (tools/events, which controller-runtime's recorder uses, and the older
// tools/record) log at error level when the API server refuses an Event.
const rejectedEventMessage = "Server rejected event (will not retry!)"

// quietTerminatingNamespaceEvents returns log with one line demoted: an Event
// the API server refused because its namespace is being deleted is logged at
// V(1) (debug), without a stack trace, instead of at error level.
//
// That refusal is normal: every controller that emits an Event about an
// object in a namespace being deleted gets it, and the object (with its
// Events) is about to disappear anyway. At error level, with a stack trace,
// it looks like a fault an operator must act on. Any other refused Event,
// and any other error, is logged unchanged.
//
// controller-runtime gives the event recorder the manager's logger (named
// "events") and offers no option to give it a logger of its own, so the
// filter sits on the process's logger and matches the line by both its
// message and its error.
func quietTerminatingNamespaceEvents(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if sink == nil {
		return log
	}
	// The wrapper adds a frame between the caller and the real sink; without
	// this, every line would report the wrapper as its caller.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return log.WithSink(terminatingEventSink{sink})
}

// isRefusedForTerminatingNamespace reports whether err is the API server's
// refusal to create an object in a namespace that is being deleted: a
// Forbidden status carrying the NamespaceTerminating cause, which the
// NamespaceLifecycle admission plugin sets.
func isRefusedForTerminatingNamespace(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// terminatingEventSink passes everything to the sink it wraps, except the
// rejected-Event error for a terminating namespace, which it logs at V(1).
type terminatingEventSink struct {
	logr.LogSink
}

func (s terminatingEventSink) Error(err error, msg string, keysAndValues ...any) {
	if msg != rejectedEventMessage || !isRefusedForTerminatingNamespace(err) {
		s.LogSink.Error(err, msg, keysAndValues...)
		return
	}
	// logr checks Enabled before Info, not before Error: do it here.
	if !s.Enabled(1) {
		return
	}
	kv := make([]any, 0, len(keysAndValues)+2)
	kv = append(kv, keysAndValues...)
	kv = append(kv, "error", err.Error())
	s.Info(1, msg, kv...)
}

func (s terminatingEventSink) WithValues(keysAndValues ...any) logr.LogSink {
	return terminatingEventSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s terminatingEventSink) WithName(name string) logr.LogSink {
	return terminatingEventSink{s.LogSink.WithName(name)}
}

// WithCallDepth keeps caller reporting right for helpers that log on behalf
// of their caller (logr's WithCallDepth); a sink without the notion ignores it.
func (s terminatingEventSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return terminatingEventSink{cd.WithCallDepth(depth)}
	}
	return s
}
