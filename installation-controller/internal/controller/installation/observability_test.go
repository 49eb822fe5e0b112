package installation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// reconcileTrace decides, from the installation as the cache shows it, which
// trace a reconcile joins: the job's (continued from the annotation), or a
// new one: rooted in a reconcile that starts a root job (its job ID is set
// when the job starts), or of its own, without a job ID, for a reconcile
// outside any job.
func TestReconcileTrace(t *testing.T) {
	const (
		continues = "continues the job's trace"
		startsJob = "new trace, starts a root job"
		ownTrace  = "own trace, no job"
	)
	now := metav1.Now()
	parent := []metav1.OwnerReference{{APIVersion: lsv1alpha1.GroupName + "/v1alpha1", Kind: "Installation", Name: "parent", UID: "p", Controller: ptr.To(true)}}
	reconcile := map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	interrupt := map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationInterrupt)}
	inst := func(owners []metav1.OwnerReference, deleted bool, annotations map[string]string, phase lsv1alpha1.Phase, job, finished string) *lsv1alpha1.Installation {
		i := &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i", UID: "u", OwnerReferences: owners,
			Annotations: map[string]string{tracing.TraceContextAnnotation: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"}}}
		for k, v := range annotations {
			i.Annotations[k] = v
		}
		if deleted {
			i.DeletionTimestamp = &now
			i.Finalizers = []string{lsv1alpha1.Finalizer}
		}
		i.Status.Phase, i.Status.JobID, i.Status.JobIDFinished = phase, job, finished
		return i
	}
	lost := inst(nil, false, nil, lsv1alpha1.PhaseSucceeded, "j1", "j1")
	lost.Annotations[StartedJobAnnotation] = newJobID(lost)

	cases := map[string]struct {
		inst *lsv1alpha1.Installation
		want string
	}{
		"root idle after a job":                   {inst(nil, false, nil, lsv1alpha1.PhaseSucceeded, "j1", "j1"), ownTrace},
		"root idle after a failed job":            {inst(nil, false, nil, lsv1alpha1.PhaseFailed, "j1", "j1"), ownTrace},
		"root interrupted outside a job":          {inst(nil, false, interrupt, lsv1alpha1.PhaseSucceeded, "j1", "j1"), ownTrace},
		"root starts a job":                       {inst(nil, false, reconcile, lsv1alpha1.PhaseSucceeded, "j1", "j1"), startsJob},
		"root starts its first job":               {inst(nil, false, reconcile, "", "", ""), startsJob},
		"root runs a job":                         {inst(nil, false, nil, lsv1alpha1.PhaseProgressing, "j2", "j1"), continues},
		"root runs a job, the next one waits":     {inst(nil, false, reconcile, lsv1alpha1.PhaseProgressing, "j2", "j1"), continues},
		"root resumes a job whose start was lost": {lost, continues},
		"root deleted starts its deletion":        {inst(nil, true, nil, lsv1alpha1.PhaseSucceeded, "j1", "j1"), startsJob},
		"root deletion running":                   {inst(nil, true, nil, lsv1alpha1.PhaseDeleting, "j2", "j1"), continues},
		"root DeleteFailed idle":                  {inst(nil, true, nil, lsv1alpha1.PhaseDeleteFailed, "j2", "j2"), ownTrace},
		"root DeleteFailed retried":               {inst(nil, true, reconcile, lsv1alpha1.PhaseDeleteFailed, "j2", "j2"), startsJob},
		"sub idle after a job":                    {inst(parent, false, nil, lsv1alpha1.PhaseSucceeded, "j1", "j1"), ownTrace},
		"sub created, no job handed yet":          {inst(parent, false, nil, "", "", ""), ownTrace},
		"sub ignores a reconcile annotation":      {inst(parent, false, reconcile, lsv1alpha1.PhaseSucceeded, "j1", "j1"), ownTrace},
		"sub handed a job":                        {inst(parent, false, nil, lsv1alpha1.PhaseSucceeded, "j2", "j1"), continues},
		"sub runs a job":                          {inst(parent, false, nil, lsv1alpha1.PhaseProgressing, "j2", "j1"), continues},
		"sub deleted, waits for its deletion job": {inst(parent, true, nil, lsv1alpha1.PhaseSucceeded, "j1", "j1"), continues},
		"sub deletion running":                    {inst(parent, true, nil, lsv1alpha1.PhaseDeleting, "j2", "j1"), continues},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			traced, job := reconcileTrace(tc.inst)
			got := ownTrace
			switch {
			case traced == client.Object(tc.inst):
				got = continues
			case len(traced.GetAnnotations()) != 0 || traced.GetName() != tc.inst.Name || traced.GetNamespace() != tc.inst.Namespace:
				t.Fatalf("new trace from %T %s/%s with annotations %v", traced, traced.GetNamespace(), traced.GetName(), traced.GetAnnotations())
			case startsRootJob(tc.inst):
				got = startsJob
			}
			if got != tc.want {
				t.Fatalf("%s, want %s", got, tc.want)
			}
			wantJob := tc.inst.Status.JobID
			if got == ownTrace {
				wantJob = ""
			}
			if job != wantJob {
				t.Errorf("job ID %q, want %q", job, wantJob)
			}
		})
	}
}
