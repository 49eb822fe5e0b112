package execution

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/jobid"
)

// DefaultOwnerRecheck is the default of Reconciler.OwnerRecheck.
const DefaultOwnerRecheck = time.Minute

func (r *Reconciler) ownerRecheck() time.Duration {
	if r.OwnerRecheck > 0 {
		return r.OwnerRecheck
	}
	return DefaultOwnerRecheck
}

// ownsDeletion reports whether this controller runs the deletion jobs of exec,
// a deleted execution that an installation owns: only when that installation
// will never hand one over (jobid.ParentGone, read live, as this controller
// caches no installations). It then also writes status.jobID (newScope: the
// status Patcher omits it otherwise).
//
// The answer decides something only while no job runs: whether the deletion
// waits for the installation's job or starts one of its own. So the
// installation is read only then. While a job runs it is not read:
//   - a job handed over and not started yet, or an install job (which
//     finishes first): the installation wrote the job ID (an owned
//     execution starts no job of its own except a deletion job, which starts
//     in the write that sets InitDelete);
//   - a deletion job: its writer stays the same until it ends (ParentGone
//     never turns false again once true, so an own job stays own; a handed
//     one stays the installation's even if the installation goes
//     meanwhile). The answer at its start is remembered by job ID; only
//     a restarted controller reads it once more.
func (r *Reconciler) ownsDeletion(ctx context.Context, exec *lsv1alpha1.Execution) (bool, error) {
	st := &exec.Status
	key := client.ObjectKeyFromObject(exec)
	running := jobid.HasNewJob(st.JobID, st.JobIDFinished)
	if running && !deletePhase(st.Phase) {
		if !exec.DeletionTimestamp.IsZero() {
			// A deletion job the installation handed over and this
			// reconcile starts: remembered as the installation's, so that
			// its later reconciles need not read the installation.
			r.deletionJobs.set(key, st.JobID, false)
		}
		return false, nil
	}
	if running {
		if own, ok := r.deletionJobs.get(key, st.JobID); ok {
			return own, nil
		}
	}
	gone, err := jobid.ParentGone(ctx, r.APIReader, exec)
	if err != nil {
		return false, err
	}
	if running {
		r.deletionJobs.set(key, st.JobID, gone)
	}
	return gone, nil
}

// deletionJobs remembers, per execution, the deletion job it runs and whether
// that job is the execution's own (true) or its installation's. It is safe
// for concurrent use; the zero value is ready.
type deletionJobs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]deletionJob
}

type deletionJob struct {
	job string
	own bool
}

func (d *deletionJobs) get(key types.NamespacedName, job string) (own, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, found := d.m[key]
	if !found || j.job != job {
		return false, false
	}
	return j.own, true
}

func (d *deletionJobs) set(key types.NamespacedName, job string, own bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[types.NamespacedName]deletionJob{}
	}
	d.m[key] = deletionJob{job: job, own: own}
}

func (d *deletionJobs) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, key)
}
