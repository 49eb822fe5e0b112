package helm

import (
	"time"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// continuousReconcileHook reconciles a Succeeded item again every
// spec.config.continuousReconcile.every, as the manifest deployer does
// (manifest.EveryHook): the release is upgraded if it drifted from the
// chart and values, rendered objects are applied again.
func continuousReconcileHook(minEvery time.Duration) extension.ReconcileExtensionHookSetup {
	return manifest.EveryHook(minEvery, func(di *lsv1alpha1.DeployItem) time.Duration {
		spec := lenientSpec(di)
		every, err := continuousEvery(spec.ContinuousReconcile)
		if err != nil {
			return 0 // reported by Reconcile
		}
		return every
	})
}

// continuousEvery is continuousReconcile.every (0 when unset).
func continuousEvery(cr *helmv1alpha1.ContinuousReconcileSpec) (time.Duration, error) {
	if cr == nil {
		return 0, nil
	}
	if cr.Cron != "" {
		return 0, lib.ConfigError(ReasonChartNotSupported, "spec.config.continuousReconcile.cron: crontab schedules are not supported yet by the helm deployer; use every")
	}
	d, err := duration("spec.config.continuousReconcile.every", cr.Every)
	if err != nil || d == nil {
		return 0, err
	}
	return d.Duration, nil
}

// checkContinuous refuses a malformed continuousReconcile, or an interval
// below the minimum.
func checkContinuous(cr *helmv1alpha1.ContinuousReconcileSpec, minEvery time.Duration) error {
	every, err := continuousEvery(cr)
	if err != nil || every == 0 {
		return err
	}
	return manifest.CheckContinuousInterval(every, minEvery)
}
