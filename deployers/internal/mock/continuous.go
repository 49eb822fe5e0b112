package mock

import (
	"time"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// continuousReconcileHook runs a Succeeded mock item again on the schedule
// of spec.config.continuousReconcile, as the manifest deployer re-applies
// its items (manifest.ScheduleHook): its export is written again.
func continuousReconcileHook(minEvery time.Duration) extension.ReconcileExtensionHookSetup {
	return manifest.ScheduleHook(minEvery, func(di *lsv1alpha1.DeployItem) manifest.Schedule {
		var raw []byte
		if di.Spec.Config != nil {
			raw = di.Spec.Config.Raw
		}
		cfg, err := ParseConfig(raw)
		if err != nil {
			return nil // reported by Reconcile
		}
		s, _ := continuousSchedule(cfg.ContinuousReconcile) // checked by ParseConfig
		return s
	})
}

// continuousSchedule is the schedule of continuousReconcile (nil: none).
func continuousSchedule(cr *mockv1alpha1.ContinuousReconcileSpec) (manifest.Schedule, error) {
	switch {
	case cr == nil || (cr.Cron == "" && cr.Every == nil):
		return nil, nil
	case cr.Cron != "" && cr.Every != nil:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile: set cron or every, not both")
	case cr.Cron != "":
		return manifest.CronSchedule(cr.Cron)
	case cr.Every.Duration <= 0:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile.every: %s is not a positive duration", cr.Every.Duration)
	}
	return manifest.Every(cr.Every.Duration), nil
}

// checkContinuous refuses a continuousReconcile more frequent than the
// deployer's minimum (manifest.CheckSchedule names the bound and its flag).
func checkContinuous(cr *mockv1alpha1.ContinuousReconcileSpec, minEvery time.Duration) error {
	s, err := continuousSchedule(cr)
	if err != nil || s == nil {
		return err
	}
	return manifest.CheckSchedule(s, minEvery)
}
