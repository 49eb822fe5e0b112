package timeouts

import (
	"errors"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/timeout"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type itemOpt func(*lsv1alpha1.DeployItem)

func item(opts ...itemOpt) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{}
	di.Annotations = map[string]string{}
	for _, o := range opts {
		o(di)
	}
	return di
}

func reconcileTime(t time.Time) itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		di.Annotations[lsv1alpha1.ReconcileTimeAnnotation] = t.Format(time.RFC3339)
	}
}

func progressing(since time.Time) itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		di.Status.Phase = lsv1alpha1.PhaseProgressing
		di.Status.LastReconcileTime = &metav1.Time{Time: since}
	}
}

// finished: the item picked job up at pickedUp and finished it Succeeded.
func finished(job string, pickedUp time.Time) itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		di.Status.Phase = lsv1alpha1.PhaseSucceeded
		di.Status.JobID, di.Status.JobIDFinished = job, job
		di.Status.LastReconcileTime = &metav1.Time{Time: pickedUp}
	}
}

func aborting(since time.Time) itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		di.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationAbort)
		di.Annotations[lsv1alpha1.AbortTimeAnnotation] = since.Format(time.RFC3339)
	}
}

// userAbort: operation: abort as a user writes it, without abort-time.
func userAbort() itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		di.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationAbort)
	}
}

func specTimeout(v string) itemOpt {
	return func(di *lsv1alpha1.DeployItem) {
		d := lsv1alpha1.Duration(v)
		di.Spec.Timeout = &d
	}
}

func TestEvaluate(t *testing.T) {
	cfg := DefaultConfig()
	for name, tc := range map[string]struct {
		item    *lsv1alpha1.DeployItem
		now     time.Time
		cfg     Config
		action  Action
		requeue time.Duration
		timeout time.Duration
		wantErr bool
	}{
		"nothing pending": {item: item(), now: t0, cfg: cfg},
		"finished item": {item: item(func(di *lsv1alpha1.DeployItem) {
			di.Status.Phase = lsv1alpha1.PhaseSucceeded
			di.Status.LastReconcileTime = &metav1.Time{Time: t0.Add(-time.Hour)}
		}), now: t0, cfg: cfg},
		"pickup pending":              {item: item(reconcileTime(t0)), now: t0.Add(time.Minute), cfg: cfg, requeue: 4 * time.Minute},
		"pickup due exactly":          {item: item(reconcileTime(t0)), now: t0.Add(5 * time.Minute), cfg: cfg, action: ActionFailPickup, timeout: 5 * time.Minute},
		"pickup overdue":              {item: item(reconcileTime(t0)), now: t0.Add(time.Hour), cfg: cfg, action: ActionFailPickup, timeout: 5 * time.Minute},
		"pickup none":                 {item: item(reconcileTime(t0)), now: t0.Add(time.Hour), cfg: Config{Pickup: timeout.Disabled(), Progressing: cfg.Progressing, Abort: cfg.Abort}},
		"pickup bad annotation":       {item: item(func(di *lsv1alpha1.DeployItem) { di.Annotations[lsv1alpha1.ReconcileTimeAnnotation] = "yesterday" }), now: t0, cfg: cfg, wantErr: true},
		"progressing default pending": {item: item(progressing(t0)), now: t0.Add(3 * time.Minute), cfg: cfg, requeue: 7 * time.Minute},
		"progressing default due":     {item: item(progressing(t0)), now: t0.Add(10 * time.Minute), cfg: cfg, action: ActionAbort, timeout: 10 * time.Minute},
		"progressing spec.timeout due": {item: item(progressing(t0), specTimeout("2s")), now: t0.Add(2 * time.Second), cfg: cfg,
			action: ActionAbort, timeout: 2 * time.Second},
		"progressing spec.timeout none":     {item: item(progressing(t0), specTimeout("none")), now: t0.Add(time.Hour), cfg: cfg},
		"progressing default none":          {item: item(progressing(t0)), now: t0.Add(time.Hour), cfg: Config{Pickup: cfg.Pickup, Progressing: timeout.Disabled(), Abort: cfg.Abort}},
		"progressing spec wins over none":   {item: item(progressing(t0), specTimeout("1m")), now: t0.Add(time.Hour), cfg: Config{Pickup: cfg.Pickup, Progressing: timeout.Disabled(), Abort: cfg.Abort}, action: ActionAbort, timeout: time.Minute},
		"progressing bad spec uses default": {item: item(progressing(t0), specTimeout("soon")), now: t0.Add(time.Minute), cfg: cfg, requeue: 9 * time.Minute, wantErr: true},
		"init counts as running":            {item: item(progressing(t0), func(di *lsv1alpha1.DeployItem) { di.Status.Phase = lsv1alpha1.PhaseInit }), now: t0.Add(11 * time.Minute), cfg: cfg, action: ActionAbort, timeout: 10 * time.Minute},
		"abort pending":                     {item: item(progressing(t0), aborting(t0.Add(10*time.Minute))), now: t0.Add(11 * time.Minute), cfg: cfg, requeue: 4 * time.Minute},
		"abort due":                         {item: item(progressing(t0), aborting(t0.Add(10*time.Minute))), now: t0.Add(15 * time.Minute), cfg: cfg, action: ActionFailAbort, timeout: 5 * time.Minute},
		// The abort stamps of an earlier job (their removal failed) do not
		// fail a new job at once: its own progressing timeout applies.
		"stale abort-time ignored": {item: item(progressing(t0), aborting(t0.Add(-time.Hour))), now: t0.Add(time.Minute), cfg: cfg, requeue: 9 * time.Minute},
		"stale abort-time, progressing due": {item: item(progressing(t0), aborting(t0.Add(-time.Hour))), now: t0.Add(10 * time.Minute), cfg: cfg,
			action: ActionAbort, timeout: 10 * time.Minute},
		// A user's operation: abort carries no abort-time: the abort timeout
		// has not started, so the progressing timeout still runs (its abort
		// request then writes abort-time).
		"user's abort without abort-time, progressing pending": {item: item(progressing(t0), userAbort()), now: t0.Add(time.Minute), cfg: cfg,
			requeue: 9 * time.Minute},
		"user's abort without abort-time, progressing due": {item: item(progressing(t0), userAbort()), now: t0.Add(10 * time.Minute), cfg: cfg,
			action: ActionAbort, timeout: 10 * time.Minute},
		"abort with a broken abort-time, progressing due": {item: item(progressing(t0), userAbort(), func(di *lsv1alpha1.DeployItem) {
			di.Annotations[lsv1alpha1.AbortTimeAnnotation] = "soon"
		}), now: t0.Add(10 * time.Minute), cfg: cfg, action: ActionAbort, timeout: 10 * time.Minute, wantErr: true},
		"abort-time of the job counts":  {item: item(progressing(t0), aborting(t0)), now: t0.Add(5 * time.Minute), cfg: cfg, action: ActionFailAbort, timeout: 5 * time.Minute},
		"abort none":                    {item: item(progressing(t0), aborting(t0)), now: t0.Add(time.Hour), cfg: Config{Pickup: cfg.Pickup, Progressing: cfg.Progressing, Abort: timeout.Disabled()}},
		"aborted item already finished": {item: item(aborting(t0), func(di *lsv1alpha1.DeployItem) { di.Status.Phase = lsv1alpha1.PhaseFailed }), now: t0.Add(time.Hour), cfg: cfg},
		"deleting is not aborted":       {item: item(progressing(t0), func(di *lsv1alpha1.DeployItem) { di.Status.Phase = lsv1alpha1.PhaseDeleting }), now: t0.Add(time.Hour), cfg: cfg},
		// A stamp whose removal was lost after the job it handed over had
		// finished does not fail the finished item; a stamp of the next
		// job (newer than the last pickup) and one of a job not finished do.
		"stamp left over from a finished job":    {item: item(reconcileTime(t0), finished("j1", t0.Add(time.Second))), now: t0.Add(time.Hour), cfg: cfg},
		"stamp of the same second as the pickup": {item: item(reconcileTime(t0), finished("j1", t0)), now: t0.Add(time.Hour), cfg: cfg},
		// The hand-over's stamp has milliseconds, the pickup's time whole
		// seconds: a pickup within the stamp's second is the common case.
		"stamp with milliseconds in the pickup's second": {item: item(func(di *lsv1alpha1.DeployItem) {
			di.Annotations[lsv1alpha1.ReconcileTimeAnnotation] = t0.Add(373 * time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
		}, finished("j1", t0)), now: t0.Add(time.Hour), cfg: cfg},
		"stamp newer than the finished job's pickup": {item: item(reconcileTime(t0.Add(time.Minute)), finished("j1", t0)), now: t0.Add(time.Hour), cfg: cfg,
			action: ActionFailPickup, timeout: 5 * time.Minute},
		"stamp of a job not finished": {item: item(reconcileTime(t0), finished("j1", t0.Add(time.Second)), func(di *lsv1alpha1.DeployItem) { di.Status.JobID = "j2" }),
			now: t0.Add(time.Hour), cfg: cfg, action: ActionFailPickup, timeout: 5 * time.Minute},
		"earliest of pickup and progressing": {item: item(progressing(t0), reconcileTime(t0.Add(8*time.Minute))), now: t0.Add(9 * time.Minute), cfg: cfg,
			requeue: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := Evaluate(tc.item, tc.now, tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadTimestamp) && tc.item.Spec.Timeout == nil {
				t.Errorf("err %v does not wrap ErrBadTimestamp", err)
			}
			if d.Action != tc.action || d.RequeueAfter != tc.requeue || d.Timeout != tc.timeout {
				t.Errorf("got %+v (action %s), want action %s requeue %s timeout %s", d, d.Action, tc.action, tc.requeue, tc.timeout)
			}
		})
	}
}

func TestTimeoutFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Var(&cfg.Pickup, "pickup-timeout", "")
	fs.Var(&cfg.Progressing, "progressing-timeout", "")
	fs.Var(&cfg.Abort, "abort-timeout", "")
	if err := fs.Parse([]string{"--pickup-timeout=none", "--progressing-timeout=90s"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.Pickup.Disabled || cfg.Progressing != timeout.After(90*time.Second) || cfg.Abort != timeout.After(DefaultAbortTimeout) {
		t.Errorf("parsed %+v", cfg)
	}
	if got := cfg.Pickup.String(); got != "none" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"0s", "-1m", "soon", "", "None"} {
		if err := fs.Parse([]string{"--abort-timeout=" + bad}); err == nil {
			t.Errorf("--abort-timeout=%q accepted", bad)
		}
	}
}

func TestEvaluatePickupWarning(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PickupWarning = timeout.After(30 * time.Second)
	stamp := t0.Add(250 * time.Millisecond)
	stamped := func(di *lsv1alpha1.DeployItem) {
		di.Annotations[lsv1alpha1.ReconcileTimeAnnotation] = stamp.Format("2006-01-02T15:04:05.000Z07:00")
	}
	for name, tc := range map[string]struct {
		item    *lsv1alpha1.DeployItem
		now     time.Time
		cfg     Config
		requeue time.Duration
		overdue *PickupWait
	}{
		// the warning's wake-up comes first, computed from the stamp
		"before the warning": {item: item(stamped), now: stamp.Add(10 * time.Second), cfg: cfg, requeue: 20 * time.Second},
		"warning due": {item: item(stamped), now: stamp.Add(30 * time.Second), cfg: cfg, requeue: 4*time.Minute + 30*time.Second,
			overdue: &PickupWait{Stamp: stamp.Format("2006-01-02T15:04:05.000Z07:00"), Since: stamp, FailsAt: stamp.Add(5 * time.Minute)}},
		"zero warning is the default": {item: item(stamped), now: stamp.Add(10 * time.Second),
			cfg: Config{Pickup: cfg.Pickup, Progressing: cfg.Progressing, Abort: cfg.Abort}, requeue: DefaultPickupWarning - 10*time.Second},
		"warning none": {item: item(stamped), now: stamp.Add(10 * time.Second),
			cfg: Config{Pickup: cfg.Pickup, PickupWarning: timeout.Disabled(), Progressing: cfg.Progressing, Abort: cfg.Abort}, requeue: 4*time.Minute + 50*time.Second},
		"warning not before the timeout": {item: item(stamped), now: stamp.Add(10 * time.Second),
			cfg: Config{Pickup: timeout.After(20 * time.Second), PickupWarning: cfg.PickupWarning, Progressing: cfg.Progressing, Abort: cfg.Abort}, requeue: 10 * time.Second},
		"pickup timeout none still warns": {item: item(stamped), now: stamp.Add(time.Hour),
			cfg:     Config{Pickup: timeout.Disabled(), PickupWarning: cfg.PickupWarning, Progressing: cfg.Progressing, Abort: cfg.Abort},
			overdue: &PickupWait{Stamp: stamp.Format("2006-01-02T15:04:05.000Z07:00"), Since: stamp}},
		"stamp left over from a finished job": {item: item(stamped, finished("j1", t0.Add(time.Second))), now: t0.Add(time.Minute), cfg: cfg},
		"no stamp":                            {item: item(), now: t0, cfg: cfg},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := Evaluate(tc.item, tc.now, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != ActionNone || d.RequeueAfter != tc.requeue {
				t.Errorf("got action %s requeue %s, want None, %s", d.Action, d.RequeueAfter, tc.requeue)
			}
			switch {
			case (d.PickupOverdue == nil) != (tc.overdue == nil):
				t.Errorf("overdue = %+v, want %+v", d.PickupOverdue, tc.overdue)
			case d.PickupOverdue != nil && (d.PickupOverdue.Stamp != tc.overdue.Stamp || !d.PickupOverdue.Since.Equal(tc.overdue.Since) ||
				!d.PickupOverdue.FailsAt.Equal(tc.overdue.FailsAt)):
				t.Errorf("overdue = %+v, want %+v", d.PickupOverdue, tc.overdue)
			}
		})
	}
}

func TestPickupWarningMessage(t *testing.T) {
	di := item(func(di *lsv1alpha1.DeployItem) { di.Spec.Type = "landscaper.gardener.cloud/kubernetes-manifests" })
	w := &PickupWait{Since: t0, FailsAt: t0.Add(5 * time.Minute)}
	want := "no deployer has picked up this deploy item of type landscaper.gardener.cloud/kubernetes-manifests for 30s; " +
		"is a deployer for this type running? it fails with PickupTimeout at 2026-01-02T03:09:05Z"
	if got := PickupWarningMessage(di, w, t0.Add(30*time.Second+400*time.Millisecond)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	di.Spec.Target = &lsv1alpha1.ObjectReference{Name: "prod"}
	w.FailsAt = time.Time{}
	want = "no deployer has picked up this deploy item of type landscaper.gardener.cloud/kubernetes-manifests for 30s; " +
		"is a deployer for this type running and responsible for its Target prod? the pickup timeout is disabled: it waits until a deployer picks it up"
	if got := PickupWarningMessage(di, w, t0.Add(30*time.Second)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
