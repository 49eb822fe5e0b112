package installation

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// phaseInitDelete waits for the successors to be gone (unless
// delete-ignore-successors), passes delete-without-uninstall down, and
// deletes the sub-objects.
func (r *Reconciler) phaseInitDelete(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	if err := r.awaitSuccessorsGone(ctx, s.inst); err != nil {
		return "", err
	}
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	objs := make([]client.Object, 0, len(subs)+1)
	for _, sub := range subs {
		objs = append(objs, sub)
	}
	if exec != nil {
		objs = append(objs, exec)
	}
	for _, o := range objs {
		s.deleted = true
		if err := r.deleteSubObject(ctx, o, passedDown(s.inst)); err != nil {
			return "", err
		}
	}
	return lsv1alpha1.PhaseTriggerDelete, nil
}

// deleteSubObject deletes o with the annotations set (the job's trace
// context added while tracing is on).
func (r *Reconciler) deleteSubObject(ctx context.Context, o client.Object, set map[string]*string) error {
	if o.GetDeletionTimestamp() != nil {
		// Being deleted already: the job's trace context goes with the
		// job (TriggerDelete).
		return patchAnnotations(ctx, r.Client, o, set)
	}
	// An object this job deletes continues the deletion job's trace
	// from the moment it is deleted, not the trace of the job that
	// created it: the span context goes into the same write as
	// delete-without-uninstall (only while tracing is on).
	gone, err := prepareDeletion(ctx, r.Client, o, set)
	if err != nil || gone {
		return err
	}
	if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", o.GetName(), err)
	}
	return nil
}

// phaseTriggerDelete hands the job to every remaining sub-object.
func (r *Reconciler) phaseTriggerDelete(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	for _, sub := range subs {
		if err := r.handOverInstallation(ctx, s, sub, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	if exec != nil {
		if err := r.handOverExecution(ctx, s, exec, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	return lsv1alpha1.PhaseDeleting, nil
}

// phaseDeleting waits for the sub-objects. All gone: the context objects go
// and the finalizer is removed. All finished but some left: DeleteFailed. An
// object never finishes before its sub-objects, so one failure among
// unfinished sub-objects still waits.
func (r *Reconciler) phaseDeleting(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	inst := s.inst
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	job := inst.Status.JobID
	var working []string
	var failed []subObjectFailure
	// As in Progressing, the failed sub-objects' lastErrors come from the
	// same (cached) objects: quoting the cause costs no request.
	check := func(kind, name, finished string, phase lsv1alpha1.Phase, lastError *lsv1alpha1.Error) {
		if finishedWith(finished, job) {
			failed = append(failed, subObjectFailure{kind: kind, name: name, phase: phase, lastError: lastError})
		} else {
			working = append(working, kind+" "+name)
		}
	}
	for _, sub := range subs {
		check("sub-installation", sub.Name, sub.Status.JobIDFinished, sub.Status.Phase, sub.Status.LastError)
	}
	if exec != nil {
		check("execution", exec.Name, exec.Status.JobIDFinished, exec.Status.Phase, exec.Status.LastError)
	}
	switch {
	case len(working) > 0:
		return "", waitf("%s to be deleted", strings.Join(working, ", "))
	case len(failed) > 0:
		return "", jobEndsf(ReasonDeleteFailed, lsv1alpha1.ErrorForInfoOnly, "%s", subObjectsDeleteFailedMessage(failed))
	}
	if err := r.deleteContext(ctx, inst); err != nil {
		return "", err
	}
	if err := patchMeta(ctx, r.Client, inst, []string{lsv1alpha1.Finalizer}, nil); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	s.gone = true
	return "", nil
}

// deleteContext deletes the DataObjects and Targets of the installation's
// context (its imports copied for its sub-installations, their exports).
func (r *Reconciler) deleteContext(ctx context.Context, inst *lsv1alpha1.Installation) error {
	if err := r.deleteTemplateState(ctx, inst); err != nil {
		return err
	}
	sel := client.MatchingLabels{ContextLabel: labelValue(inst.Name)}
	if err := r.Client.DeleteAllOf(ctx, &lsv1alpha1.DataObject{}, client.InNamespace(inst.Namespace), sel); err != nil {
		return fmt.Errorf("deleting context data objects: %w", err)
	}
	if err := r.Client.DeleteAllOf(ctx, &lsv1alpha1.Target{}, client.InNamespace(inst.Namespace), sel); err != nil {
		return fmt.Errorf("deleting context targets: %w", err)
	}
	return nil
}
