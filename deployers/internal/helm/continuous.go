package helm

import (
	"time"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// continuousReconcileHook reconciles a Succeeded item again on the
// schedule of spec.config.continuousReconcile (every or cron), as the
// manifest deployer does (manifest.ScheduleHook): a release that drifted
// from its chart and values is upgraded, rendered objects are applied again.
func continuousReconcileHook(minEvery time.Duration) extension.ReconcileExtensionHookSetup {
	return manifest.ScheduleHook(minEvery, func(di *lsv1alpha1.DeployItem) manifest.Schedule {
		spec := lenientSpec(di)
		s, err := continuousSchedule(spec.ContinuousReconcile)
		if err != nil {
			return nil // reported by Reconcile
		}
		return s
	})
}

// continuousSchedule is the schedule of continuousReconcile (nil: none).
func continuousSchedule(cr *helmv1alpha1.ContinuousReconcileSpec) (manifest.Schedule, error) {
	switch {
	case cr == nil:
		return nil, nil
	case cr.Cron != "" && cr.Every != nil:
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "spec.config.continuousReconcile: set cron or every, not both")
	case cr.Cron != "":
		return manifest.CronSchedule(cr.Cron)
	}
	d, err := duration("spec.config.continuousReconcile.every", cr.Every)
	if err != nil || d == nil {
		return nil, err
	}
	return manifest.Every(d.Duration), nil
}

// checkContinuous refuses a malformed continuousReconcile, or one more
// frequent than the minimum.
func checkContinuous(cr *helmv1alpha1.ContinuousReconcileSpec, minEvery time.Duration) error {
	s, err := continuousSchedule(cr)
	if err != nil || s == nil {
		return err
	}
	return manifest.CheckSchedule(s, minEvery)
}
