package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/kit/testlog"
)

// recordedLine is one call that reached the recording sink.
type recordedLine struct {
	error bool // Error rather than Info
	level int  // Info's V level
	err   error
	msg   string
	kv    []any // values of the logger, then of the call
}

// recordingSink records what reaches it; it enables V levels up to maxLevel.
type recordingSink struct {
	maxLevel int
	values   []any
	lines    *[]recordedLine
}

func (s recordingSink) Init(logr.RuntimeInfo)  {}
func (s recordingSink) Enabled(level int) bool { return level <= s.maxLevel }
func (s recordingSink) Info(level int, msg string, kv ...any) {
	*s.lines = append(*s.lines, recordedLine{level: level, msg: msg, kv: append(append([]any{}, s.values...), kv...)})
}

func (s recordingSink) Error(err error, msg string, kv ...any) {
	*s.lines = append(*s.lines, recordedLine{error: true, err: err, msg: msg, kv: append(append([]any{}, s.values...), kv...)})
}

func (s recordingSink) WithValues(kv ...any) logr.LogSink {
	s.values = append(append([]any{}, s.values...), kv...)
	return s
}
func (s recordingSink) WithName(string) logr.LogSink { return s }

// terminatingNamespaceError is what kube-apiserver answers when an Event is
// created in a namespace that is being deleted.
func terminatingNamespaceError() error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "cm.1234",
		fmt.Errorf("unable to create new content in namespace demo because it is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: "namespace demo is being terminated",
		Field:   "metadata.namespace",
	})
	return err
}

func TestRejectedEventInTerminatingNamespaceIsLoggedAtDebug(t *testing.T) {
	var lines []recordedLine
	log := quietTerminatingNamespaceEvents(logr.New(recordingSink{maxLevel: 1, lines: &lines}))
	// As controller-runtime derives the recorder's logger.
	log = log.WithValues("component", "test").WithName("events")

	log.Error(terminatingNamespaceError(), rejectedEventMessage, "event", "the event")

	if len(lines) != 1 {
		t.Fatalf("want one line, got %+v", lines)
	}
	got := lines[0]
	if got.error || got.level != 1 || got.msg != rejectedEventMessage {
		t.Fatalf("want the rejection logged with Info at V(1), got %+v", got)
	}
	want := []any{"component", "test", "event", "the event", "error", terminatingNamespaceError().Error()}
	if fmt.Sprint(got.kv) != fmt.Sprint(want) {
		t.Errorf("key/values = %v, want %v", got.kv, want)
	}

	// Below debug level the line is not written at all.
	lines = nil
	quiet := quietTerminatingNamespaceEvents(logr.New(recordingSink{maxLevel: 0, lines: &lines}))
	quiet.Error(terminatingNamespaceError(), rejectedEventMessage, "event", "the event")
	if len(lines) != 0 {
		t.Errorf("at info level: want no line, got %+v", lines)
	}
}

func TestOtherErrorsAreLoggedUnchanged(t *testing.T) {
	rbacForbidden := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "cm.1234",
		errors.New(`User "system:serviceaccount:x:y" cannot create resource "events"`))
	// The terminating cause without Forbidden is not the admission refusal.
	invalidWithCause := apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "cm.1234", nil)
	invalidWithCause.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}

	for _, tc := range []struct {
		name string
		err  error
		msg  string
	}{
		{"an Event refused for another reason", rbacForbidden, rejectedEventMessage},
		{"an Event refused as invalid", invalidWithCause, rejectedEventMessage},
		{"an Event that cannot be built", errors.New("bad request"), rejectedEventMessage},
		{"another line with the same error", terminatingNamespaceError(), "creating ConfigMap"},
		{"a line without error", nil, rejectedEventMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []recordedLine
			log := quietTerminatingNamespaceEvents(logr.New(recordingSink{maxLevel: 1, lines: &lines})).WithName("events")
			log.Error(tc.err, tc.msg, "event", "the event")
			if len(lines) != 1 || !lines[0].error || !errors.Is(lines[0].err, tc.err) || lines[0].msg != tc.msg ||
				fmt.Sprint(lines[0].kv) != fmt.Sprint([]any{"event", "the event"}) {
				t.Errorf("want the error passed through unchanged, got %+v", lines)
			}
		})
	}
}

// jsonLines decodes the JSON lines out holds so far (out is written by the
// event broadcaster's goroutine while the test reads).
func jsonLines(t *testing.T, out *testlog.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range out.Lines() {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// The process's logger keeps error lines as they were: at error level, with
// a stack trace that starts at the caller, not inside the filter.
func TestLoggerKeepsErrorsAndTheirStackTraces(t *testing.T) {
	var out testlog.Buffer
	log, err := newLogger("test", Options{LogLevel: "debug"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	log.WithName("events").Error(errors.New("boom"), rejectedEventMessage)

	lines := jsonLines(t, &out)
	if len(lines) != 1 || lines[0]["level"] != "error" || lines[0]["error"] != "boom" {
		t.Fatalf("want one error line, got %v", lines)
	}
	stack, _ := lines[0]["stacktrace"].(string)
	first, _, _ := strings.Cut(stack, "\n")
	if !strings.Contains(first, "TestLoggerKeepsErrorsAndTheirStackTraces") {
		t.Errorf("stack trace should start at the caller, starts at %q", first)
	}
}

// End to end against a real API server: an Event emitted through a manager's
// recorder about an object in a namespace being deleted is refused by the API
// server, and the manager's logger writes that at debug level without a stack
// trace. envtest runs no namespace controller, so the namespace stays
// terminating for the whole test.
func TestEventInTerminatingNamespaceIsNotAnError(t *testing.T) {
	env := testenv.StartT(t, clientgoscheme.Scheme)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var out testlog.Buffer
	log, err := newLogger("test", Options{LogLevel: "debug"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "being-deleted"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cm"}}
	for _, obj := range []client.Object{ns, cm} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace phase = %q, want Terminating", ns.Status.Phase)
	}

	mgr.GetEventRecorder("test").Eventf(cm, nil, corev1.EventTypeNormal, "Testing", "Test", "about an object in a namespace being deleted")

	g := gomega.NewWithT(t)
	var rejected map[string]any
	g.Eventually(func() map[string]any {
		for _, l := range jsonLines(t, &out) {
			if l["msg"] == rejectedEventMessage {
				return l
			}
		}
		return nil
	}).WithTimeout(30 * time.Second).ShouldNot(gomega.BeNil())
	for _, l := range jsonLines(t, &out) {
		if l["msg"] == rejectedEventMessage {
			rejected = l
		}
		if l["level"] == "error" {
			t.Errorf("error line: %v", l)
		}
	}
	if rejected["level"] != "debug" || rejected["stacktrace"] != nil {
		t.Errorf("want the refused Event logged at debug level without a stack trace, got %v", rejected)
	}
	if e, _ := rejected["error"].(string); !strings.Contains(e, "being terminated") {
		t.Errorf("the line should say why the Event was refused, got %v", rejected)
	}
}
