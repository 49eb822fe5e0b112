package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

var key = types.NamespacedName{Namespace: "ns", Name: "t"}

func newConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "appstudio.redhat.com", Resource: "deploymenttargets"}, "t", errors.New("modified"))
}

// logLine is one entry a logger wrote, with its verbosity.
type logLine struct {
	level int
	text  string
}

// capture returns a context whose logger records every entry up to V(1).
func capture(ctx context.Context) (context.Context, *[]logLine) {
	var lines []logLine
	log := funcr.New(func(prefix, args string) {
		l := logLine{text: prefix + args}
		// funcr writes the verbosity first: "level"=N.
		_, _ = fmt.Sscanf(args, `"level"=%d`, &l.level)
		lines = append(lines, l)
	}, funcr.Options{Verbosity: 1})
	return logr.NewContext(ctx, log), &lines
}

// TestFinish: how each kind of outcome ends a reconcile. A conflict (however
// wrapped) ends it without an error, unreported, to run again soon; a wait
// ends it quietly; a stalled error is reported but not returned (retrying
// cannot help); any other error is reported and returned as it is.
func TestFinish(t *testing.T) {
	conflict := fmt.Errorf("removing finalizer: %w", newConflict())
	other := fmt.Errorf("reading SpaceRequest s: %w", apierrors.NewServiceUnavailable("down"))
	stalled := fmt.Errorf("templating: %w", Stalledf("InvalidBlueprint", "blueprint.yaml: no such file"))
	waiting := fmt.Errorf("imports: %w", Waitingf("ImportNotFound", "waiting for DataObject d"))
	for _, c := range []struct {
		name         string
		res          Result
		err          error
		wantRes      ctrl.Result
		wantErr      error
		wantReported bool
		wantLog      string
		wantLevel    int
	}{
		{name: "success", res: Continue().RequeueAfter(time.Minute), wantRes: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "success, stopped", res: Stop(), wantRes: ctrl.Result{}},
		{name: "conflict", err: conflict, wantRes: ctrl.Result{RequeueAfter: ConflictRetry}, wantLog: "retrying on its newer copy", wantLevel: 1},
		{name: "conflict, later requeue", res: Continue().RequeueAfter(time.Minute), err: conflict, wantRes: ctrl.Result{RequeueAfter: ConflictRetry}},
		{name: "conflict, sooner requeue", res: Continue().RequeueAfter(time.Millisecond), err: conflict, wantRes: ctrl.Result{RequeueAfter: time.Millisecond}},
		{name: "waiting", res: Stop().RequeueAfter(time.Minute), err: waiting, wantRes: ctrl.Result{RequeueAfter: time.Minute}, wantLog: "ImportNotFound", wantLevel: 1},
		{name: "stalled", err: stalled, wantReported: true, wantLog: "stalled: the configuration must change", wantLevel: 0},
		{name: "stalled, requeue kept", res: Continue().RequeueAfter(time.Hour), err: stalled, wantRes: ctrl.Result{RequeueAfter: time.Hour}, wantReported: true},
		{name: "error", err: other, wantErr: other, wantReported: true},
		{name: "error, requeue kept", res: Continue().RequeueAfter(time.Second), err: other, wantRes: ctrl.Result{RequeueAfter: time.Second}, wantErr: other, wantReported: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, lines := capture(context.Background())
			var reported []error
			var o Outcomes
			res, err := o.Finish(ctx, key, c.res, c.err, func(err error) { reported = append(reported, err) })
			if res != c.wantRes || !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Errorf("Finish = %+v, %v; want %+v, %v", res, err, c.wantRes, c.wantErr)
			}
			if c.wantReported {
				if len(reported) != 1 || !errors.Is(reported[0], c.err) {
					t.Errorf("reported %v, want %v once", reported, c.err)
				}
			} else if len(reported) > 0 {
				t.Errorf("reported %v, want nothing", reported)
			}
			if c.wantLog != "" {
				found := false
				for _, l := range *lines {
					if strings.Contains(l.text, c.wantLog) {
						found = true
						if l.level != c.wantLevel {
							t.Errorf("logged %q at V(%d), want V(%d)", l.text, l.level, c.wantLevel)
						}
					}
				}
				if !found {
					t.Errorf("logged %v, want a line with %q", *lines, c.wantLog)
				}
			}
		})
	}
}

// TestFinishWithoutReport: a nil report is allowed for every outcome.
func TestFinishWithoutReport(t *testing.T) {
	var o Outcomes
	for _, err := range []error{nil, newConflict(), Stalledf("R", "x"), Waitingf("R", "x"), errors.New("x")} {
		_, _ = o.Finish(context.Background(), key, Continue(), err, nil)
	}
	for range ConflictsBeforeReport {
		_, _ = o.Finish(context.Background(), key, Continue(), newConflict(), nil)
	}
}

// TestOutcomesConflictStreak: conflicts in a row on one object back off,
// doubling from ConflictRetry up to MaxConflictRetry; the first
// ConflictsBeforeReport-1 are quiet, the ConflictsBeforeReport-th is
// reported (once, wrapping the conflict) and from then on they are logged at
// the default level; a reconcile that ends otherwise (or Forget) starts the
// count again. Another object's streak is its own.
func TestOutcomesConflictStreak(t *testing.T) {
	conflict := newConflict()
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	var o Outcomes
	var reports []error
	report := func(err error) { reports = append(reports, err) }
	ctx, lines := capture(context.Background())
	conflictRound := func(key types.NamespacedName) time.Duration {
		t.Helper()
		res, err := o.Finish(ctx, key, Continue(), conflict, report)
		if err != nil {
			t.Fatalf("a conflict returned the error %v", err)
		}
		return res.RequeueAfter
	}

	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := conflictRound(key); got != w {
			t.Errorf("conflict %d in a row: retry after %v, want %v", i+1, got, w)
		}
		wantReports, wantLevel := 0, 1
		if i+1 >= ConflictsBeforeReport {
			wantReports, wantLevel = 1, 0
		}
		if len(reports) != wantReports {
			t.Fatalf("after %d conflicts in a row: reported %v, want %d report(s)", i+1, reports, wantReports)
		}
		last := (*lines)[len(*lines)-1]
		if last.level != wantLevel || !strings.Contains(last.text, fmt.Sprintf(`"conflictsInARow"=%d`, i+1)) {
			t.Errorf("conflict %d in a row logged %q at V(%d), want it counted at V(%d)", i+1, last.text, last.level, wantLevel)
		}
	}
	if !apierrors.IsConflict(reports[0]) || !strings.Contains(reports[0].Error(), "5 times in a row") {
		t.Errorf("report = %v, want the conflict, counted", reports[0])
	}
	if got := conflictRound(other); got != ConflictRetry {
		t.Errorf("another object's first conflict: retry after %v, want %v", got, ConflictRetry)
	}

	if _, err := o.Finish(ctx, key, Continue(), nil, report); err != nil {
		t.Fatal(err)
	}
	if got := conflictRound(key); got != ConflictRetry {
		t.Errorf("first conflict after a success: retry after %v, want %v", got, ConflictRetry)
	}
	conflictRound(key)
	if _, err := o.Finish(ctx, key, Continue(), Waitingf("R", "waiting"), report); err != nil {
		t.Fatalf("a wait returned the error %v", err)
	}
	if got := conflictRound(key); got != ConflictRetry {
		t.Errorf("first conflict after a wait: retry after %v, want %v", got, ConflictRetry)
	}
	o.Forget(key)
	if got := conflictRound(key); got != ConflictRetry {
		t.Errorf("first conflict after Forget: retry after %v, want %v", got, ConflictRetry)
	}
	if len(o.streaks) != 2 {
		t.Errorf("streaks held for %d objects, want 2 (key and other)", len(o.streaks))
	}
	if len(reports) != 1 {
		t.Errorf("reported %d times, want once", len(reports))
	}
}

// TestConflictNotedOnSpan: a conflict is an event on the reconcile's span.
func TestConflictNotedOnSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), "reconcile")
	var o Outcomes
	_, _ = o.Finish(ctx, key, Continue(), newConflict(), nil)
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 || len(ended[0].Events()) != 1 || ended[0].Events()[0].Name != "conflict" {
		t.Fatalf("spans %v, want one with the event conflict", ended)
	}
}

func TestConflictRetryAfter(t *testing.T) {
	for streak, want := range map[int]time.Duration{
		0: ConflictRetry, 1: ConflictRetry, 2: 2 * ConflictRetry, 7: MaxConflictRetry, 100: MaxConflictRetry,
	} {
		if got := ConflictRetryAfter(streak); got != want {
			t.Errorf("ConflictRetryAfter(%d) = %v, want %v", streak, got, want)
		}
	}
}

// TestCombine: the write's conflict decides over a step that only stopped,
// a step's failure decides over the write's conflict, and two failures are
// both kept.
func TestCombine(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "things"}, "t", errors.New("modified"))
	failed := errors.New("step failed")
	writeFailed := errors.New("write failed")
	stalled := Stalledf("Bad", "bad config")
	for _, c := range []struct {
		name        string
		step, write error
		want        []error
		wantNil     bool
	}{
		{name: "nothing", wantNil: true},
		{name: "step only", step: failed, want: []error{failed}},
		{name: "write only", write: writeFailed, want: []error{writeFailed}},
		{name: "stalled step, write conflict", step: stalled, write: conflict, want: []error{conflict}},
		{name: "step failure, write conflict", step: failed, write: conflict, want: []error{failed}},
		{name: "both fail", step: failed, write: writeFailed, want: []error{failed, writeFailed}},
	} {
		got := Combine(c.step, c.write)
		if c.wantNil != (got == nil) {
			t.Errorf("%s: Combine = %v", c.name, got)
		}
		for _, w := range c.want {
			if !errors.Is(got, w) {
				t.Errorf("%s: Combine = %v, want it to hold %v", c.name, got, w)
			}
		}
		if c.name == "step failure, write conflict" && apierrors.IsConflict(got) {
			t.Errorf("%s: the write's conflict hides the step's failure: %v", c.name, got)
		}
	}
}
