package manifest

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// ContinuousReconcileHook is continuousReconcileHook with the default
// minimum interval (DefaultMinContinuousReconcileInterval).
var ContinuousReconcileHook = continuousReconcileHook(DefaultMinContinuousReconcileInterval)

// continuousReconcileHook re-applies a Succeeded item on the schedule of
// spec.config.continuousReconcile (v1alpha2), against drift on the target
// (see ScheduleHook).
func continuousReconcileHook(minEvery time.Duration) extension.ReconcileExtensionHookSetup {
	return ScheduleHook(minEvery, func(di *lsv1alpha1.DeployItem) Schedule {
		cfg, err := parseConfig(di)
		if err != nil {
			// A bad configuration is reported by Reconcile, not by the hook.
			return nil
		}
		s, _ := continuousSchedule(cfg.spec.ContinuousReconcile)
		return s
	})
}

// continuousSchedule is the schedule of continuousReconcile (nil: none).
func continuousSchedule(cr *manifestv1alpha2.ContinuousReconcileSpec) (Schedule, error) {
	switch {
	case cr == nil:
		return nil, nil
	case cr.Cron != "" && cr.Every != nil:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile: set cron or every, not both")
	case cr.Cron != "":
		return CronSchedule(cr.Cron)
	case cr.Every != nil:
		return Every(cr.Every.Duration), nil
	}
	return nil, nil
}

// ScheduleHook reconciles a Succeeded item again on the schedule read from
// its configuration (nil: never). It is a ShouldReconcile hook: it forces a
// reconcile when the schedule's next time after lastReconcileTime has come,
// and otherwise asks for a requeue then. A schedule more frequent than
// minEvery is never waited for: the hook forces one reconcile, whose
// Reconcile fails the item naming the bound (CheckSchedule), after which the
// hook leaves the Failed item alone. The helm deployer shares it.
func ScheduleHook(minEvery time.Duration, schedule func(*lsv1alpha1.DeployItem) Schedule) extension.ReconcileExtensionHookSetup {
	return extension.ReconcileExtensionHookSetup{
		HookTypes: []extension.HookType{extension.ShouldReconcileHook},
		Hook: func(_ context.Context, log logr.Logger, di *lsv1alpha1.DeployItem, _ *lsv1alpha1.Target, _ extension.HookType) (*extension.HookResult, error) {
			if di == nil || di.DeletionTimestamp != nil || di.Status.Phase != lsv1alpha1.PhaseSucceeded || di.Status.LastReconcileTime == nil {
				return nil, nil
			}
			s := schedule(di)
			if s == nil {
				return nil, nil
			}
			if shortestGap(s) < minEvery {
				return extension.RequeueAfter(0, false), nil
			}
			next := s.Next(di.Status.LastReconcileTime.Time)
			if next.IsZero() {
				return nil, nil
			}
			if left := time.Until(next); left > 0 {
				return extension.RequeueAfter(left, true), nil
			}
			log.V(1).Info("continuous reconcile: reconciling again", "due", next)
			return extension.RequeueAfter(time.Until(s.Next(time.Now())), false), nil
		},
	}
}

// shortestGap is the shortest time between the schedule's next few times
// (a cron schedule's gaps differ); a fixed interval is itself.
func shortestGap(s Schedule) time.Duration {
	if e, ok := s.(Every); ok {
		return time.Duration(e)
	}
	const looks = 16
	shortest := time.Duration(1<<63 - 1)
	t := s.Next(time.Now())
	for range looks {
		n := s.Next(t)
		if t.IsZero() || n.IsZero() {
			break
		}
		shortest = min(shortest, n.Sub(t))
		t = n
	}
	return shortest
}

// checkContinuousInterval refuses a malformed continuousReconcile, or one
// more frequent than the deployer's minimum (see CheckSchedule).
func checkContinuousInterval(cfg *config, minEvery time.Duration) error {
	s, err := continuousSchedule(cfg.spec.ContinuousReconcile)
	if err != nil || s == nil {
		return err
	}
	return CheckSchedule(s, minEvery)
}

// CheckSchedule refuses a continuousReconcile more frequent than the
// deployer's minimum: it would make the deployer reconcile the item (and
// write its status) in a tight loop. Not raised silently: the item's owner
// learns that the value does not do what it says.
func CheckSchedule(s Schedule, minEvery time.Duration) error {
	gap := shortestGap(s)
	if gap >= minEvery {
		return nil
	}
	field := "spec.config.continuousReconcile.cron"
	if _, ok := s.(Every); ok {
		field = "spec.config.continuousReconcile.every"
	}
	return lib.ConfigError(lib.ReasonInvalidConfig,
		"%s: %s is below the deployer's minimum of %s (--min-continuous-reconcile-interval)", field, gap, minEvery)
}
