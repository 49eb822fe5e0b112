package manifest

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// ContinuousReconcileHook is continuousReconcileHook with the default
// minimum interval (DefaultMinContinuousReconcileInterval).
var ContinuousReconcileHook = continuousReconcileHook(DefaultMinContinuousReconcileInterval)

// continuousReconcileHook re-applies a Succeeded item every
// spec.config.continuousReconcile.every (v1alpha2), against drift on the
// target (see EveryHook).
func continuousReconcileHook(minEvery time.Duration) extension.ReconcileExtensionHookSetup {
	return EveryHook(minEvery, func(di *lsv1alpha1.DeployItem) time.Duration {
		cfg, err := parseConfig(di)
		if err != nil || cfg.spec.ContinuousReconcile == nil || cfg.spec.ContinuousReconcile.Every == nil {
			// A bad configuration is reported by Reconcile, not by the hook.
			return 0
		}
		return cfg.spec.ContinuousReconcile.Every.Duration
	})
}

// EveryHook reconciles a Succeeded item again every interval that every
// reads from its configuration (0: never). It is a ShouldReconcile hook: it
// forces a reconcile when the interval has passed since lastReconcileTime,
// and otherwise asks for a requeue when it will have. An interval below
// minEvery is never waited for: the hook forces one reconcile, whose
// Reconcile fails the item naming the bound (CheckContinuousInterval), after
// which the hook leaves the Failed item alone. The helm deployer shares it.
func EveryHook(minEvery time.Duration, every func(*lsv1alpha1.DeployItem) time.Duration) extension.ReconcileExtensionHookSetup {
	return extension.ReconcileExtensionHookSetup{
		HookTypes: []extension.HookType{extension.ShouldReconcileHook},
		Hook: func(_ context.Context, log logr.Logger, di *lsv1alpha1.DeployItem, _ *lsv1alpha1.Target, _ extension.HookType) (*extension.HookResult, error) {
			if di == nil || di.DeletionTimestamp != nil || di.Status.Phase != lsv1alpha1.PhaseSucceeded || di.Status.LastReconcileTime == nil {
				return nil, nil
			}
			interval := every(di)
			if interval <= 0 {
				return nil, nil
			}
			if interval < minEvery {
				return extension.RequeueAfter(0, false), nil
			}
			next := di.Status.LastReconcileTime.Add(interval)
			if left := time.Until(next); left > 0 {
				return extension.RequeueAfter(left, true), nil
			}
			log.V(1).Info("continuous reconcile: reconciling again", "every", interval)
			return extension.RequeueAfter(interval, false), nil
		},
	}
}

// checkContinuousInterval refuses a continuousReconcile.every below the
// deployer's minimum (see CheckContinuousInterval).
func checkContinuousInterval(cfg *config, minEvery time.Duration) error {
	cr := cfg.spec.ContinuousReconcile
	if cr == nil || cr.Every == nil {
		return nil
	}
	return CheckContinuousInterval(cr.Every.Duration, minEvery)
}

// CheckContinuousInterval refuses a continuousReconcile.every below the
// deployer's minimum: it would make the deployer reconcile the item (and
// write its status) in a tight loop. Not raised silently: the item's owner
// learns that the value does not do what it says.
func CheckContinuousInterval(every, minEvery time.Duration) error {
	if every >= minEvery {
		return nil
	}
	return lib.ConfigError(lib.ReasonInvalidConfig,
		"spec.config.continuousReconcile.every: %s is below the deployer's minimum of %s (--min-continuous-reconcile-interval)",
		every, minEvery)
}
