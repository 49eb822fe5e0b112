package installation

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// handleInterrupt moves an interrupt annotation from the installation to its
// sub-installations and execution; the execution controller fails the
// unfinished deploy items, so the whole tree finishes as usual.
func (r *Reconciler) handleInterrupt(ctx context.Context, s *scope) (flow.Result, error) {
	if lsv1alpha1.Operation(s.inst.Annotations[lsv1alpha1.OperationAnnotation]) != lsv1alpha1.OperationInterrupt {
		return flow.Continue(), nil
	}
	subs, exec, err := r.subObjects(ctx, s.inst)
	if err != nil {
		return flow.Stop(), err
	}
	if err := r.passInterrupt(ctx, subs, exec); err != nil {
		return flow.Stop(), err
	}
	removeAnnotation := func(ctx context.Context) error {
		return s.track(func() error {
			return patchAnnotations(ctx, r.Client, s.inst, map[string]*string{lsv1alpha1.OperationAnnotation: nil})
		})
	}
	if inst := s.inst; inst.Status.Phase == lsv1alpha1.PhaseInit && inst.Status.JobID != inst.Status.JobIDFinished {
		// A job still in Init (e.g. waiting for its predecessors) has no
		// unfinished deploy items the interrupt could fail, so it would
		// never end; phaseInit ends it. The annotation goes only after
		// that status is written, so the interrupt is never lost.
		s.interrupted = true
		s.patch.AfterStored(removeAnnotation)
	} else if err := removeAnnotation(ctx); err != nil {
		return flow.Stop(), err
	}
	r.Recorder.Eventf(s.inst, nil, "Normal", ReasonInterrupted, "Interrupt", "interrupt handed to %d sub-installation(s) and %d execution(s)", len(subs), btoi(exec != nil))
	return flow.Continue(), nil
}

// passInterrupt annotates the sub-installations and the execution with the
// interrupt.
func (r *Reconciler) passInterrupt(ctx context.Context, subs []*lsv1alpha1.Installation, exec *lsv1alpha1.Execution) error {
	op := string(lsv1alpha1.OperationInterrupt)
	objs := make([]client.Object, 0, len(subs)+1)
	for _, sub := range subs {
		objs = append(objs, sub)
	}
	if exec != nil {
		objs = append(objs, exec)
	}
	for _, o := range objs {
		if err := patchAnnotations(ctx, r.Client, o, map[string]*string{lsv1alpha1.OperationAnnotation: &op}); err != nil {
			return err
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// interruptedInInit ends a job interrupted before it was handed to any
// sub-object (or while waiting for its predecessors: msg, checked with err):
// nothing else would end the job, and a deletion waits for it (seed 002: a
// running job can be interrupted).
func interruptedInInit(msg string, err error) error {
	why := "the job was interrupted in phase Init"
	if err == nil && msg != "" {
		why += " while waiting for " + msg
	}
	return jobEnds(lsv1alpha1.ReasonInterrupted, lsv1alpha1.ErrorInterrupted, errors.New(why))
}
