package installation

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// takeOverHandDeletion runs the deletion of a sub-object this job renders
// but finds being deleted. The installation deletes only orphans (what no
// template renders) and only inside its own jobs, so someone deleted it by
// hand; its deletion waits for a job from its parent, which no one else
// hands over. This job hands over its own and Init waits (s.handDeleted)
// until the object is gone: the owner watch then wakes Init, which creates
// it again. A deletion that failed fails the job; the next job retries it.
// An orphan (obj is no longer rendered) found on its way out in a later
// reconcile of Init, after a wait, is taken over the same way, but the
// messages say it is not created again.
func (r *Reconciler) takeOverHandDeletion(ctx context.Context, s *scope, obj client.Object, orphan bool) error {
	// A sub-installation's siblings that import from it are not deleted:
	// marked like an orphan, it does not wait for them (they would wait in
	// turn for this job, which waits for it). They get the job once it is back.
	if sub, ok := obj.(*lsv1alpha1.Installation); ok && sub.Annotations[lsv1alpha1.DeleteIgnoreSuccessorsAnnotation] != "true" {
		yes := "true"
		if err := patchAnnotations(ctx, r.Client, sub, map[string]*string{lsv1alpha1.DeleteIgnoreSuccessorsAnnotation: &yes}); err != nil {
			return err
		}
	}
	failed, err := r.handOverDeletion(ctx, s, obj)
	if err != nil {
		return err
	}
	what := kindOf(obj) + " " + obj.GetName()
	if failed != nil {
		return jobEndsf(ReasonDeleteFailed, lsv1alpha1.ErrorInternalProblem, "%s", handDeletionFailedMessage(what, orphan, *failed))
	}
	if orphan {
		s.orphansGoing = append(s.orphansGoing, what)
	} else {
		s.handDeleted = append(s.handDeleted, what)
	}
	return nil
}

// handDeletionFailedMessage is the lastError message of a job whose
// sub-object deleted by hand (what) ended its deletion failed: the
// sub-object's own cause, quoted as SubObjectsDeleteFailed quotes it (with
// the same marker, so a parent passes it up the tree), and how to go on.
// The cause comes from the object the job read already: no request. An
// object without a lastError (written by something else than Terrace's
// controllers) is only named. An orphan (see takeOverHandDeletion) is said
// to be one: usually the job deleted it, not a user.
func handDeletionFailedMessage(what string, orphan bool, f subObjectFailure) string {
	how := " was deleted by hand"
	if orphan {
		how = ", no longer rendered by the blueprint, was deleted"
	}
	if f.lastError == nil || f.lastError.Reason == "" {
		return what + how + " and its deletion failed (see its status); the next job retries it"
	}
	return what + how + " and its deletion failed" + causeMarker + f.cause() + deleteRetryAdvice
}

// handOverDeletion hands this job to obj, a deleted execution or
// sub-installation, which then runs its deletion flow, and returns it as a
// failure when it finished this job DeleteFailed (nil otherwise).
func (r *Reconciler) handOverDeletion(ctx context.Context, s *scope, obj client.Object) (*subObjectFailure, error) {
	job := s.inst.Status.JobID
	var f subObjectFailure
	var finished string
	var err error
	switch o := obj.(type) {
	case *lsv1alpha1.Execution:
		err = r.handOverExecution(ctx, s, o, job)
		f = subObjectFailure{kind: "execution", name: o.Name, phase: o.Status.Phase, lastError: o.Status.LastError}
		finished = o.Status.JobIDFinished
	case *lsv1alpha1.Installation:
		err = r.handOverInstallation(ctx, s, o, job)
		f = subObjectFailure{kind: "sub-installation", name: o.Name, phase: o.Status.Phase, lastError: o.Status.LastError}
		finished = o.Status.JobIDFinished
	}
	if err != nil {
		return nil, err
	}
	if finishedWith(finished, job) && f.phase == lsv1alpha1.PhaseDeleteFailed {
		return &f, nil
	}
	return nil, nil
}
