package execution

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

func TestDeleteStateOf(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	before := metav1.NewTime(now.Add(-time.Minute))
	item := func(deleting bool, phase lsv1alpha1.Phase, errOp string, errAt metav1.Time, annotations map[string]string) *lsv1alpha1.DeployItem {
		di := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
		if deleting {
			di.DeletionTimestamp = &now
		}
		di.Status.Phase = phase
		if errOp != "" {
			di.Status.LastError = &lsv1alpha1.Error{Operation: errOp, LastUpdateTime: errAt}
		}
		return di
	}
	retry := map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	for _, tc := range []struct {
		name string
		di   *lsv1alpha1.DeployItem
		want deleteState
	}{
		{"not deleting", item(false, lsv1alpha1.PhaseFailed, "Delete", now, nil), deleteNotStarted},
		{"deleting, no error yet", item(true, lsv1alpha1.PhaseDeleting, "", now, nil), deleteRunning},
		{"deleting, error from before the deletion", item(true, lsv1alpha1.PhaseFailed, "Reconcile", before, nil), deleteRunning},
		{"deletion failed", item(true, lsv1alpha1.PhaseFailed, "Delete", now, nil), deleteFailed},
		{"install job failed in the same second as the deletion", item(true, lsv1alpha1.PhaseFailed, "Reconcile", now, nil), deleteRunning},
		{"failed a second after the deletion", item(true, lsv1alpha1.PhaseFailed, "Reconcile", metav1.NewTime(now.Add(time.Second)), nil), deleteFailed},
		{"DeleteFailed", item(true, lsv1alpha1.PhaseDeleteFailed, "Uninstall", now, nil), deleteFailed},
		{"interrupted in the same second as the deletion", item(true, lsv1alpha1.PhaseFailed, lsv1alpha1.OperationInterrupted, now, nil), deleteRunning},
		{"deletion failed, retry requested", item(true, lsv1alpha1.PhaseFailed, "Delete", now, retry), deleteRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deleteStateOf(tc.di); got != tc.want {
				t.Errorf("deleteStateOf = %v, want %v", got, tc.want)
			}
		})
	}
}
