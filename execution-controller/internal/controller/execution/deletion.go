package execution

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// deleteState classifies an item during deletion. Deployers delete an item
// when its deletionTimestamp is set (the deletion is the trigger; no job ID
// is handed to a deleting item, which would race with a deletion that fails
// fast), and remove their finalizer when done; a failed deletion leaves the
// item DeleteFailed, or Failed with a lastError of the deletion (see
// deleteStateOf).
type deleteState int

const (
	deleteNotStarted deleteState = iota
	deleteRunning
	deleteFailed
)

func deleteStateOf(di *lsv1alpha1.DeployItem) deleteState {
	if di.DeletionTimestamp == nil {
		return deleteNotStarted
	}
	le := di.Status.LastError
	if !di.Status.Phase.IsFailed() || le == nil || le.Operation == lsv1alpha1.OperationInterrupted ||
		operation(di) == lsv1alpha1.OperationReconcile { // a retry has been requested
		// An interrupt is this controller's own verdict on the install job,
		// never a deployer's on the deletion.
		return deleteRunning
	}
	// A deployer reports a failed deletion as DeleteFailed, or Failed with
	// lastError.operation Delete (the deployer library does). Times have a
	// resolution of one second, so an install job that failed in the same
	// second as the deletion must not count: only an error from a later
	// second is taken as the deletion's verdict without those marks.
	if di.Status.Phase == lsv1alpha1.PhaseDeleteFailed || le.Operation == OperationDelete ||
		le.LastUpdateTime.After(di.DeletionTimestamp.Time) {
		return deleteFailed
	}
	return deleteRunning
}

// deleteInOrder deletes the items of items that nothing else in items
// depends on (reverse dependency order), passing delete-without-uninstall on
// when withoutUninstall is set. It reports the names of items whose deletion
// failed and whether any deletion is still running.
func (r *Reconciler) deleteInOrder(ctx context.Context, s *scope, items map[string]*lsv1alpha1.DeployItem, withoutUninstall bool) (failed []string, running bool, err error) {
	g := depgraph.Graph{}
	for n, di := range items {
		g[n] = itemDependsOn(di)
	}
	deletable := map[string]bool{}
	for _, n := range g.Deletable() {
		deletable[n] = true
	}
	for _, n := range sortedKeys(items) {
		di := items[n]
		switch deleteStateOf(di) {
		case deleteFailed:
			// A failed deletion is a final verdict on the execution, so it
			// is confirmed live: the cache may not show yet that a retry was
			// requested (operation: reconcile) or started.
			live := &lsv1alpha1.DeployItem{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(di), live); err != nil {
				if apierrors.IsNotFound(err) {
					continue // gone meanwhile
				}
				return nil, false, err
			}
			if deleteStateOf(live) != deleteFailed {
				running = true
				continue
			}
			failed = append(failed, n)
			continue
		case deleteRunning:
			running = true
		case deleteNotStarted:
			if !deletable[n] {
				// Waits for its dependents. That is no progress of its own:
				// when nothing else runs, the dependents it waits for have
				// failed, and so has the deletion (else it would wait on a
				// failed item for ever).
				continue
			}
		}
		set := map[string]*string{}
		if withoutUninstall {
			set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = ptr.To("true")
		}
		if di.DeletionTimestamp == nil {
			// The deployer deletes the item in this job's trace (a deletion
			// job, or the orphan cleanup of an install job), not in the one
			// of the job that handed it its last job: the span context goes
			// in before the deletion, with delete-without-uninstall in one
			// write (only while tracing is on).
			set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
		}
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); err != nil {
			if apierrors.IsNotFound(err) {
				continue // gone meanwhile: nothing left to delete
			}
			return nil, false, err
		}
		if di.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, di, client.Preconditions{UID: &di.UID}); err != nil && !apierrors.IsNotFound(err) {
				return nil, false, fmt.Errorf("deleting deploy item %s: %w", di.Name, err)
			}
			running = true
			logf.FromContext(ctx).Info("deleting deploy item", "item", n, "deployItem", di.Name, "withoutUninstall", withoutUninstall)
			r.Recorder.Eventf(s.exec, di, corev1.EventTypeNormal, EventItemDeleted, "Delete", "deleting deploy item %s (%s)", di.Name, n)
		}
	}
	return failed, running, nil
}

// orphansOf returns the execution's items that left its spec before the
// running job started (they are not in the job's item set), by item name.
// An item that leaves the spec mid-job is still the job's: the next job
// deletes it.
func orphansOf(s *scope) map[string]*lsv1alpha1.DeployItem {
	inJob := jobItems(s.exec)
	orphans := map[string]*lsv1alpha1.DeployItem{}
	for n, di := range s.items {
		if !inJob[n] {
			orphans[n] = di
		}
	}
	return orphans
}

// cleanupOrphans deletes items that left the spec, in reverse dependency
// order. It reports true once none is left; a failed deletion fails the job
// once no other orphan is still being deleted.
func (r *Reconciler) cleanupOrphans(ctx context.Context, s *scope) (bool, error) {
	orphans := orphansOf(s)
	if len(orphans) == 0 {
		return true, nil
	}
	failed, running, err := r.deleteInOrder(ctx, s, orphans, false)
	if err != nil {
		return false, err
	}
	if len(failed) > 0 && !running {
		r.failJob(ctx, s, OperationReconcile, ReasonOrphanDeleteFailed,
			"deleting orphaned deploy items failed: "+strings.Join(failed, ", ")+firstCause(orphans, failed), "")
	}
	return false, nil
}

// retryFailedOrphans asks the deployer to retry the deletion of every orphan
// whose deletion failed (operation: reconcile, with this job's span context),
// as InitDelete does for a deletion job. It runs once per job, when the job
// starts (Init): the orphan cleanup then waits for the retry, and a job only
// fails with OrphanDeletionFailed when the retry failed too. Without it, a
// deletion that failed once (say its Target was missing) would fail every
// later job at once, even after its cause was fixed.
func (r *Reconciler) retryFailedOrphans(ctx context.Context, s *scope) error {
	orphans := orphansOf(s)
	for _, n := range sortedKeys(orphans) {
		di := orphans[n]
		if deleteStateOf(di) != deleteFailed {
			continue
		}
		set := map[string]*string{lsv1alpha1.OperationAnnotation: ptr.To(string(lsv1alpha1.OperationReconcile))}
		set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); client.IgnoreNotFound(err) != nil {
			return err
		}
		// The patch's response (in di) carries the request, so the cleanup
		// in this reconcile already waits for the retry.
		logf.FromContext(ctx).Info("retrying the failed deletion of an orphaned deploy item", "item", n, "deployItem", di.Name)
	}
	return nil
}

// handleDeletion runs the deletion flow once the execution has a deletion
// timestamp: InitDelete (a deletion job; delete-without-uninstall passed on)
// → TriggerDelete (items deleted in reverse dependency order) → Deleting
// (waiting) → finalizer removed, or DeleteFailed. A running install job is
// finished first (seed 002).
func (r *Reconciler) handleDeletion(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.exec.DeletionTimestamp == nil {
		return ctrl.Result{}, nil
	}
	st := &s.exec.Status
	log := logf.FromContext(ctx)
	if installRunning(st.Phase) && jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		return ctrl.Result{}, nil // the install job finishes first
	}
	s.done = true
	if !controllerutil.ContainsFinalizer(s.exec, lsv1alpha1.Finalizer) {
		s.gone = true
		return ctrl.Result{}, nil
	}

	newJob := jobid.HasNewJob(st.JobID, st.JobIDFinished)
	if !newJob || !deletePhase(st.Phase) {
		// A deletion job has to start: the first one, or a retry after DeleteFailed.
		own := false
		if !newJob {
			if !s.root {
				// The installation controller hands the deletion job over.
				log.V(1).Info("waiting for the owning installation to hand over a deletion job")
				// No job runs here: this condition is the controller's answer
				// to the object as it is now (its deletion, which moved the
				// generation), so it carries the current generation.
				meta.SetStatusCondition(&st.Conditions, metav1.Condition{
					Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonWaitingForJob,
					Message: "deletion waits for a job from the owning installation", ObservedGeneration: s.exec.Generation,
				})
				// Re-read the installation now and then: should it go
				// without handing over (its finalizer removed by hand), no
				// event tells this controller, which caches no installations.
				return ctrl.Result{RequeueAfter: r.ownerRecheck()}, nil
			}
			if st.Phase == lsv1alpha1.PhaseDeleteFailed && operation(s.exec) != lsv1alpha1.OperationReconcile {
				if len(s.items) == 0 {
					// The items went away after all (e.g. removed by hand):
					// nothing is left to delete.
					return ctrl.Result{}, r.removeFinalizer(ctx, s)
				}
				return ctrl.Result{}, nil // stays DeleteFailed until operation: reconcile
			}
			// This reconcile's span is the root of the deletion job's trace.
			if err := r.writeOwnTraceContext(ctx, s); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
			}
			st.JobID = jobid.New()
			trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(st.JobID))
			own = true
			if operation(s.exec) == lsv1alpha1.OperationReconcile {
				s.afterStatus = append(s.afterStatus, r.removeOperation(s, lsv1alpha1.OperationReconcile))
			}
		}
		r.beginDeletionJob(s)
		if own {
			return ctrl.Result{}, nil // the status write brings the next reconcile
		}
	}

	if failing(s) {
		return ctrl.Result{}, r.stopDeletion(ctx, s)
	}
	withoutUninstall := s.exec.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
	if st.Phase == lsv1alpha1.PhaseInitDelete {
		// Pass delete-without-uninstall on to every item, and on a retry ask
		// the deployers to retry deletions that failed before - in one write
		// per item, so a deployer never retries without seeing the former.
		for _, n := range sortedKeys(s.items) {
			di := s.items[n]
			set := map[string]*string{}
			if withoutUninstall {
				set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = ptr.To("true")
			}
			if deleteStateOf(di) == deleteFailed {
				set[lsv1alpha1.OperationAnnotation] = ptr.To(string(lsv1alpha1.OperationReconcile))
				// The deployer's retry belongs to this deletion job and
				// its trace (only while tracing is on).
				set = tracing.AddToPatch(ctx, di.GetAnnotations(), set)
			}
			if err := patch.Annotations(ctx, r.Client, r.FieldManager, di, "", set); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		st.Phase = lsv1alpha1.PhaseTriggerDelete
	}

	if len(s.items) == 0 {
		return ctrl.Result{}, r.removeFinalizer(ctx, s)
	}
	failed, running, err := r.deleteInOrder(ctx, s, s.items, withoutUninstall)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(failed) > 0 && !running {
		log.Info("deletion failed", "failedItems", failed)
		r.finishJob(s, lsv1alpha1.PhaseDeleteFailed, &lsv1alpha1.Error{
			Operation: OperationDelete, Reason: ReasonDeleteFailed,
			Message: "deleting deploy items failed: " + strings.Join(failed, ", ") + firstCause(s.items, failed),
		})
		return ctrl.Result{}, nil
	}
	allTriggered := true
	for _, di := range s.items {
		if di.DeletionTimestamp == nil {
			allTriggered = false
		}
	}
	if allTriggered {
		st.Phase = lsv1alpha1.PhaseDeleting
	} else {
		st.Phase = lsv1alpha1.PhaseTriggerDelete
	}
	return ctrl.Result{}, nil
}

// beginDeletionJob starts the deletion job in status.jobID (InitDelete; the
// status write is guarded).
func (r *Reconciler) beginDeletionJob(s *scope) {
	r.beginJob(s, lsv1alpha1.PhaseInitDelete)
	// Whose job this is stays so until it ends: remembered once the start is
	// written, so the job's reconciles need not read the installation again
	// (ownsDeletion).
	key, job, root := client.ObjectKeyFromObject(s.exec), s.exec.Status.JobID, s.root
	s.afterStatus = append(s.afterStatus, func(context.Context) error {
		r.deletionJobs.set(key, job, root)
		return nil
	})
}

// handedDeletionJob reports whether the execution's job is a deletion job
// that was handed over (status.jobID written by its installation) and has not
// started yet: handleDeletion starts every job handed to a deleted execution
// as a deletion job, unless an install job is still running (it finishes
// first).
func handedDeletionJob(s *scope) bool {
	st := &s.exec.Status
	return s.exec.DeletionTimestamp != nil && jobid.HasNewJob(st.JobID, st.JobIDFinished) &&
		!installRunning(st.Phase) && !deletePhase(st.Phase)
}

// stopDeletion runs a deletion job that was interrupted (marked failing): no
// further item is deleted, and once no deletion is running any more the job
// ends DeleteFailed with the interrupt's lastError, naming the items left -
// or, when none is left, the execution goes as after any deletion. (A
// deletion already running cannot be taken back: the item's deletion
// timestamp is set, and its deployer acts on that alone.)
func (r *Reconciler) stopDeletion(ctx context.Context, s *scope) error {
	var deleting, left []string
	for _, n := range sortedKeys(s.items) {
		left = append(left, n)
		if deleteStateOf(s.items[n]) == deleteRunning {
			deleting = append(deleting, n)
		}
	}
	if len(deleting) > 0 {
		logf.FromContext(ctx).V(1).Info("interrupted deletion job waits for the deletions running", "deleting", deleting)
		return nil
	}
	if len(left) == 0 {
		return r.removeFinalizer(ctx, s)
	}
	le := *s.exec.Status.LastError
	le.Message += "; deploy items left: " + strings.Join(left, ", ") + " (retry the deletion with a new job)"
	logf.FromContext(ctx).Info("interrupted deletion job ended", "itemsLeft", left)
	r.finishJob(s, lsv1alpha1.PhaseDeleteFailed, &le)
	return nil
}

// removeFinalizer lets the execution go once its items are gone.
func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) error {
	base := s.exec.DeepCopy()
	controllerutil.RemoveFinalizer(s.exec, lsv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, s.exec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(r.FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	s.gone = true
	st := &s.exec.Status
	if jobid.HasNewJob(st.JobID, st.JobIDFinished) {
		r.metrics.JobFinished(ReasonDeleted, r.clock.Finish(client.ObjectKeyFromObject(s.exec), st.JobID, jobStartTime(st), r.Now()))
	}
	logf.FromContext(ctx).Info("all deploy items deleted; execution released")
	r.Recorder.Eventf(s.exec, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete", "all deploy items deleted")
	return nil
}

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
// caches no installations). It then also writes status.jobID (patchStatus).
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
