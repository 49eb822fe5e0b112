package manifest

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// ContinuousReconcileHook re-applies a Succeeded item every
// spec.config.continuousReconcile.every (v1alpha2), against drift on the
// target. It is a ShouldReconcile hook: it forces a reconcile when the
// interval has passed since lastReconcileTime, and otherwise asks for a
// requeue when it will have.
var ContinuousReconcileHook = extension.ReconcileExtensionHookSetup{
	HookTypes: []extension.HookType{extension.ShouldReconcileHook},
	Hook: func(_ context.Context, log logr.Logger, di *lsv1alpha1.DeployItem, _ *lsv1alpha1.Target, _ extension.HookType) (*extension.HookResult, error) {
		if di == nil || di.DeletionTimestamp != nil || di.Status.Phase != lsv1alpha1.PhaseSucceeded || di.Status.LastReconcileTime == nil {
			return nil, nil
		}
		cfg, err := parseConfig(di)
		if err != nil || cfg.spec.ContinuousReconcile == nil || cfg.spec.ContinuousReconcile.Every == nil {
			// A bad configuration is reported by Reconcile, not by the hook.
			return nil, nil
		}
		every := cfg.spec.ContinuousReconcile.Every.Duration
		next := di.Status.LastReconcileTime.Add(every)
		if left := time.Until(next); left > 0 {
			return extension.RequeueAfter(left, true), nil
		}
		log.V(1).Info("continuous reconcile: re-applying", "every", every)
		return extension.RequeueAfter(every, false), nil
	},
}
