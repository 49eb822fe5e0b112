package installation

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// phaseCleanupOrphaned hands the job to the orphaned (deleted)
// sub-installations and execution, which runs their deletion flow, and
// waits until they are gone.
func (r *Reconciler) phaseCleanupOrphaned(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	var working []string
	var failed []subObjectFailure
	handOver := func(o client.Object, what string) error {
		deleteFailed, err := r.handOverDeletion(ctx, s, o)
		switch {
		case err != nil:
			return err
		case deleteFailed != nil:
			failed = append(failed, *deleteFailed)
		default:
			working = append(working, what)
		}
		return nil
	}
	if exec != nil && exec.DeletionTimestamp != nil {
		if err := handOver(exec, "execution "+exec.Name); err != nil {
			return "", err
		}
	}
	for _, sub := range subs {
		if sub.DeletionTimestamp == nil {
			continue
		}
		if err := handOver(sub, "sub-installation "+sub.Name); err != nil {
			return "", err
		}
	}
	switch {
	case len(working) > 0:
		return "", waitf("orphans %s to be deleted", strings.Join(working, ", "))
	case len(failed) > 0:
		// The cause is quoted from the orphans as the job read them: no
		// request.
		return "", jobEndsf(ReasonOrphansDeleteFailed, lsv1alpha1.ErrorInternalProblem, "%s", orphansDeleteFailedMessage(failed))
	}
	return lsv1alpha1.PhaseObjectsCreated, nil
}

// deleteOrphanedExecution deletes the execution once the blueprint renders
// no deploy items: it is an orphan; its deletion runs in CleanupOrphaned, in
// this job's trace (handed over first, only while tracing is on).
func (r *Reconciler) deleteOrphanedExecution(ctx context.Context, s *scope, exec *lsv1alpha1.Execution) error {
	s.deleted = true
	gone, err := prepareDeletion(ctx, r.Client, exec, nil)
	if err != nil {
		return err
	}
	if !gone {
		if err := r.Client.Delete(ctx, exec); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting orphaned execution: %w", err)
		}
	}
	s.inst.Status.ExecutionReference = nil
	return nil
}

// deleteOrphanedSubs deletes the sub-installations no template renders,
// marked delete-ignore-successors first: their siblings are going too.
func (r *Reconciler) deleteOrphanedSubs(ctx context.Context, s *scope, orphans map[string]*lsv1alpha1.Installation) error {
	for _, orphan := range orphans {
		if orphan.DeletionTimestamp != nil {
			continue
		}
		s.deleted = true
		// The mark and this job's trace context (only while tracing is on)
		// in one write, so the orphan's deletion joins this job's trace.
		yes := "true"
		gone, err := prepareDeletion(ctx, r.Client, orphan, map[string]*string{lsv1alpha1.DeleteIgnoreSuccessorsAnnotation: &yes})
		if err != nil {
			return err
		}
		if gone {
			continue
		}
		if err := r.Client.Delete(ctx, orphan); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting orphaned sub-installation %s: %w", orphan.Name, err)
		}
	}
	return nil
}
