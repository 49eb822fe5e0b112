package installation

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
)

// Reasons of the AutomaticReconcile condition and of its events.
const (
	// ReasonAutomaticReconcile: a job was started without the reconcile
	// annotation (automaticReconcile or reconcile-if-changed).
	ReasonAutomaticReconcile = "AutomaticReconcile"
	// ReasonReconcileScheduled: the next automatic job is due at a time the
	// condition's message names.
	ReasonReconcileScheduled = "Scheduled"
	// ReasonRetriesExhausted: failedReconcile.numberOfReconciles jobs
	// followed failed ones; only the reconcile annotation starts the next.
	ReasonRetriesExhausted = "RetriesExhausted"
	// ReasonScheduleInvalid: an interval or cronSpec of automaticReconcile
	// cannot be used.
	ReasonScheduleInvalid = "ScheduleInvalid"
)

// startAutomatically plays the reconcile annotation for an idle root
// installation when reconcile-if-changed or automaticReconcile say a job is
// due, so that startJob starts it exactly as it starts an annotated one (the
// same job ID, the same guarded start). When a job is due later, the
// reconcile is requeued for then: no event announces the moment. It also
// removes the touch annotation, whose only purpose was the watch event.
func (r *Reconciler) startAutomatically(ctx context.Context, s *scope) (flow.Result, error) {
	if err := r.removeTouch(ctx, s); err != nil {
		return flow.Stop(), err
	}
	inst := s.inst
	if !isRoot(inst) {
		return flow.Continue(), nil
	}
	if _, annotated := inst.Annotations[lsv1alpha1.OperationAnnotation]; annotated {
		// The user's own request (or an interrupt) goes first.
		return flow.Continue(), nil
	}
	state := jobState(inst)
	if state.Running() || startLost(inst) {
		return flow.Continue(), nil
	}
	if inst.DeletionTimestamp == nil && reconcileIfChanged(inst) {
		r.playReconcile(s, fmt.Sprintf("the spec changed (generation %d, the last job ran generation %d) and %s is \"true\"",
			inst.Generation, inst.Status.ObservedGeneration, lsv1alpha1.ReconcileIfChangedAnnotation))
		return flow.Continue(), nil
	}
	if inst.Status.JobIDFinished == "" || (inst.DeletionTimestamp != nil && inst.Status.Phase != lsv1alpha1.PhaseDeleteFailed) {
		// automaticReconcile never starts the first job; a deletion starts its own.
		return flow.Continue(), nil
	}
	plan := planAutomatic(autoInput{
		Spec: inst.Spec.AutomaticReconcile, Status: inst.Status.AutomaticReconcileStatus,
		Phase: inst.Status.Phase, Generation: inst.Generation, JobID: inst.Status.JobIDFinished,
		FinishedAt: jobFinishedAt(inst), Now: r.Now(), MinInterval: r.Bounds.MinAutomaticReconcileInterval,
	})
	return r.followPlan(s, plan), nil
}

// reconcileIfChanged reports whether the reconcile-if-changed annotation
// asks for a job: the spec's generation is not the one the last job ran.
func reconcileIfChanged(inst *lsv1alpha1.Installation) bool {
	return inst.Annotations[lsv1alpha1.ReconcileIfChangedAnnotation] == "true" && inst.Generation != inst.Status.ObservedGeneration
}

// jobFinishedAt is when the last job ended: the Ready condition turns
// Unknown when a job starts and True or False when it ends.
func jobFinishedAt(inst *lsv1alpha1.Installation) time.Time {
	ready := apimeta.FindStatusCondition(inst.Status.Conditions, lsv1alpha1.ConditionReady)
	if ready == nil || ready.Status == metav1.ConditionUnknown {
		return time.Time{}
	}
	return ready.LastTransitionTime.Time
}

// followPlan carries out planAutomatic's answer on the status (the
// AutomaticReconcile condition) and, for a due job, plays the annotation.
func (r *Reconciler) followPlan(s *scope, p autoPlan) flow.Result {
	inst := s.inst
	conds := &inst.Status.Conditions
	switch p.Action {
	case autoNone:
		apimeta.RemoveStatusCondition(conds, lsv1alpha1.ConditionAutomaticReconcile)
	case autoInvalid:
		r.setAutoCondition(s, metav1.ConditionFalse, ReasonScheduleInvalid, status.Message(p.Err.Error()), "Warning")
	case autoExhausted:
		r.setAutoCondition(s, metav1.ConditionFalse, ReasonRetriesExhausted, fmt.Sprintf(
			"%d automatic jobs followed failed ones (spec.automaticReconcile.failedReconcile.numberOfReconciles: %d); the reconcile annotation starts the next",
			p.Count, *p.Limit), "Normal")
	case autoWait:
		r.setAutoCondition(s, metav1.ConditionTrue, ReasonReconcileScheduled,
			fmt.Sprintf("next job at %s (%s)", p.At.UTC().Format(time.RFC3339), describePlan(p)), "")
		return flow.Continue().RequeueAfter(p.At.Sub(r.Now()))
	case autoStart:
		var count int32
		if p.OnFailed {
			count = p.Count
		}
		now := metav1.NewTime(r.Now())
		inst.Status.AutomaticReconcileStatus = &lsv1alpha1.AutomaticReconcileStatus{
			Generation: inst.Generation, NumberOfReconciles: count, LastReconcileTime: &now,
			OnFailed: p.OnFailed, JobID: newJobID(inst),
		}
		status.SetCondition(conds, inst.Generation, lsv1alpha1.ConditionAutomaticReconcile, metav1.ConditionTrue, ReasonAutomaticReconcile,
			fmt.Sprintf("job %s started at %s (%s)", inst.Status.AutomaticReconcileStatus.JobID, now.UTC().Format(time.RFC3339), describePlan(p)))
		r.playReconcile(s, fmt.Sprintf("the last job ended %s at %s (%s)", inst.Status.Phase, jobFinishedAt(inst).UTC().Format(time.RFC3339), describePlan(p)))
	}
	return flow.Continue()
}

// describePlan says which setting scheduled a job and, for jobs after
// failed ones, which of how many it is.
func describePlan(p autoPlan) string {
	d := "succeededReconcile"
	if p.OnFailed {
		d = "failedReconcile"
	}
	if p.CronSpec != "" {
		d += fmt.Sprintf(" on schedule %q", p.CronSpec)
	} else {
		d += fmt.Sprintf(" every %s", p.Interval)
	}
	if p.OnFailed {
		d += fmt.Sprintf(", job %d", p.Count)
		if p.Limit != nil {
			d += fmt.Sprintf(" of %d", *p.Limit)
		}
	}
	if p.Clamped {
		d += fmt.Sprintf("; raised to at least %s after the last job, the shortest %s allows", p.Interval, FlagMinAutomaticReconcileInterval)
	}
	return d
}

// setAutoCondition sets the AutomaticReconcile condition and, when it
// changed and eventType is set, says so in one event.
func (r *Reconciler) setAutoCondition(s *scope, st metav1.ConditionStatus, reason, msg, eventType string) {
	inst := s.inst
	if !status.SetCondition(&inst.Status.Conditions, inst.Generation, lsv1alpha1.ConditionAutomaticReconcile, st, reason, msg) || eventType == "" {
		return
	}
	s.patch.OnStored(func() {
		r.Recorder.Eventf(inst, nil, eventType, reason, "AutomaticReconcile", "%s", msg)
	})
}

// playReconcile makes this reconcile start a job as the reconcile
// annotation does: startJob consumes it (the metadata patch removes an
// annotation the object does not carry, which changes nothing) and records
// the job it started. The event goes out once the start is stored.
func (r *Reconciler) playReconcile(s *scope, why string) {
	inst := s.inst
	if inst.Annotations == nil {
		inst.Annotations = map[string]string{}
	}
	inst.Annotations[lsv1alpha1.OperationAnnotation] = string(lsv1alpha1.OperationReconcile)
	s.patch.OnStored(func() {
		r.Recorder.Eventf(inst, nil, "Normal", ReasonAutomaticReconcile, "Reconcile", "job %s started without the reconcile annotation: %s", inst.Status.JobID, why)
	})
}

// removeTouch removes the touch annotation; the status this reconcile
// computed so far is kept (the patch response carries the stored one).
func (r *Reconciler) removeTouch(ctx context.Context, s *scope) error {
	if _, ok := s.inst.Annotations[lsv1alpha1.TouchAnnotation]; !ok {
		return nil
	}
	computed := s.inst.Status.DeepCopy()
	err := s.track(func() error {
		return patchAnnotations(ctx, r.Client, s.inst, map[string]*string{lsv1alpha1.TouchAnnotation: nil})
	})
	s.inst.Status = *computed
	return err
}
