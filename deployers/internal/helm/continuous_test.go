package helm

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
)

// TestContinuousReconcileHook: a Succeeded item is reconciled again once
// continuousReconcile.every has passed, and waited for until then; an
// interval below the minimum forces the reconcile that fails the item. A
// cron schedule (also one with month or weekday names) is due at its next
// time after the last reconcile.
func TestContinuousReconcileHook(t *testing.T) {
	item := func(cr string, last time.Duration) *lsv1alpha1.DeployItem {
		raw := `{"apiVersion":"helm.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderConfiguration","continuousReconcile":` + cr + `}`
		return &lsv1alpha1.DeployItem{
			Spec: lsv1alpha1.DeployItemSpec{Config: &runtime.RawExtension{Raw: []byte(raw)}},
			Status: lsv1alpha1.DeployItemStatus{Phase: lsv1alpha1.PhaseSucceeded,
				LastReconcileTime: &metav1.Time{Time: time.Now().Add(-last)}},
		}
	}
	hook := continuousReconcileHook(time.Minute).Hook
	cases := []struct {
		name     string
		di       *lsv1alpha1.DeployItem
		want     *extension.HookResult
		waitFrom time.Duration
	}{
		{"due", item(`{"every":"5m"}`, 10*time.Minute), &extension.HookResult{}, 5 * time.Minute},
		{"not due", item(`{"every":"5m"}`, time.Minute), &extension.HookResult{AbortReconcile: true}, 4 * time.Minute},
		{"below the minimum", item(`{"every":"10s"}`, time.Hour), extension.RequeueAfter(0, false), 0},
		{"cron due", item(`{"cron":"*/5 * * * *"}`, time.Hour), &extension.HookResult{}, 5 * time.Minute},
		{"cron not due", item(`{"cron":"0 0 1 1 *"}`, time.Minute), &extension.HookResult{AbortReconcile: true}, 366 * 24 * time.Hour},
		{"cron with names", item(`{"cron":"0 0 1 jan *"}`, time.Minute), &extension.HookResult{AbortReconcile: true}, 366 * 24 * time.Hour},
		{"both", item(`{"cron":"* * * * *","every":"5m"}`, time.Hour), nil, 0},
	}
	for _, tc := range cases {
		got, err := hook(context.Background(), logr.Discard(), tc.di, nil, extension.ShouldReconcileHook)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch {
		case tc.want == nil && got != nil, tc.want != nil && got == nil:
			t.Fatalf("%s: got %+v, want %+v", tc.name, got, tc.want)
		case tc.want == nil:
			continue
		case got.AbortReconcile != tc.want.AbortReconcile:
			t.Errorf("%s: abort %v, want %v", tc.name, got.AbortReconcile, tc.want.AbortReconcile)
		case tc.waitFrom > 0 && (got.ReconcileResult.RequeueAfter > tc.waitFrom || got.ReconcileResult.RequeueAfter <= 0):
			t.Errorf("%s: requeue after %s, want about %s", tc.name, got.ReconcileResult.RequeueAfter, tc.waitFrom)
		case tc.waitFrom == 0 && got.ReconcileResult.RequeueAfter != tc.want.ReconcileResult.RequeueAfter:
			t.Errorf("%s: requeue after %s, want %s", tc.name, got.ReconcileResult.RequeueAfter, tc.want.ReconcileResult.RequeueAfter)
		}
	}
}
