package flow

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// scope records the steps that ran.
type scope struct{ ran []string }

func step(name string, res Result, err error) Step[*scope] {
	return func(_ context.Context, s *scope) (Result, error) {
		s.ran = append(s.ran, name)
		return res, err
	}
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		steps   []Step[*scope]
		wantRan []string
		want    Result
		wantErr error
	}{
		{name: "no steps"},
		{
			name:    "all continue, in order",
			steps:   []Step[*scope]{step("a", Continue(), nil), step("b", Continue(), nil), step("c", Continue(), nil)},
			wantRan: []string{"a", "b", "c"},
		},
		{
			name:    "stop ends the list",
			steps:   []Step[*scope]{step("a", Continue(), nil), step("b", Stop(), nil), step("c", Continue(), nil)},
			wantRan: []string{"a", "b"},
			want:    Stop(),
		},
		{
			name:    "an error ends the list and is returned",
			steps:   []Step[*scope]{step("a", Continue(), nil), step("b", Continue(), boom), step("c", Continue(), nil)},
			wantRan: []string{"a", "b"},
			wantErr: boom,
		},
		{
			name: "requeues merge over every step seen, the failing one's included",
			steps: []Step[*scope]{
				step("a", Continue().RequeueAfter(time.Minute), nil),
				step("b", Continue().RequeueAfter(10*time.Second), boom),
				step("c", Continue().RequeueAfter(time.Second), nil),
			},
			wantRan: []string{"a", "b"},
			want:    Continue().RequeueAfter(10 * time.Second),
			wantErr: boom,
		},
		{
			name: "a stopping step's requeue merges with earlier ones",
			steps: []Step[*scope]{
				step("a", Continue().RequeueAfter(time.Second), nil),
				step("b", Stop().RequeueAfter(time.Minute), nil),
			},
			wantRan: []string{"a", "b"},
			want:    Stop().RequeueAfter(time.Second),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{}
			got, err := Run(context.Background(), s, tc.steps...)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("result = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(s.ran, tc.wantRan) {
				t.Errorf("ran %v, want %v", s.ran, tc.wantRan)
			}
		})
	}
}

func TestResult(t *testing.T) {
	if !Continue().IsZero() || Continue().Stopped() || Continue().After() != 0 {
		t.Errorf("Continue() = %+v, want the zero result", Continue())
	}
	if !Stop().Stopped() || Stop().IsZero() {
		t.Errorf("Stop() = %+v, want a stopping result", Stop())
	}
	if r := Continue().RequeueAfter(time.Minute); r.After() != time.Minute || r.Stopped() || r.IsZero() {
		t.Errorf("RequeueAfter(1m) = %+v", r)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if r := Stop().RequeueAfter(time.Minute).RequeueAfter(d); r.After() != time.Minute {
			t.Errorf("RequeueAfter(%v) changed the delay to %v; a non-positive delay asks nothing", d, r.After())
		}
	}
	if got := Stop().RequeueAfter(time.Second).Ctrl(); got != (ctrl.Result{RequeueAfter: time.Second}) {
		t.Errorf("Ctrl() = %+v", got)
	}
}

// TestMerge: the list stops when either result stops, and the lowest
// non-zero requeue wins, as Cluster API merges results.
func TestMerge(t *testing.T) {
	cases := []struct {
		a, b, want time.Duration
	}{
		{0, 0, 0},
		{time.Second, 0, time.Second},
		{0, time.Second, time.Second},
		{time.Second, time.Minute, time.Second},
		{time.Minute, time.Second, time.Second},
	}
	for _, tc := range cases {
		a, b := Continue().RequeueAfter(tc.a), Continue().RequeueAfter(tc.b)
		if got := a.Merge(b).After(); got != tc.want {
			t.Errorf("Merge(%v, %v) requeues after %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := MergeCtrl(a.Ctrl(), b.Ctrl()).RequeueAfter; got != tc.want {
			t.Errorf("MergeCtrl(%v, %v) requeues after %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if got := MergeCtrl(ctrl.Result{RequeueAfter: -time.Second}, ctrl.Result{}); got.RequeueAfter != 0 {
		t.Errorf("MergeCtrl of a negative delay requeues after %v, want nothing", got.RequeueAfter)
	}
	if got := MergeCtrl(ctrl.Result{RequeueAfter: -time.Second}, ctrl.Result{RequeueAfter: time.Minute}); got.RequeueAfter != time.Minute {
		t.Errorf("MergeCtrl(-1s, 1m) requeues after %v, want 1m", got.RequeueAfter)
	}
	for _, c := range [][2]Result{{Stop(), Continue()}, {Continue(), Stop()}, {Stop(), Stop()}} {
		if !c[0].Merge(c[1]).Stopped() {
			t.Errorf("%+v merged with %+v does not stop", c[0], c[1])
		}
	}
	if Continue().Merge(Continue()).Stopped() {
		t.Error("two continuing results merged stop")
	}
}
