// Package jobs decides, from an installation's status and annotations alone,
// whether a reconcile starts a job, continues one, or has nothing to do
// (seed 002: "Reconcile Jobs", "Creation of an Installation", "Starting
// Another Reconcile Job", "Deleting an Installation").
package jobs

import (
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// State is what the decision depends on.
type State struct {
	// Root is true for installations without a parent.
	Root bool
	// Deleting is true when the installation has a deletion timestamp.
	Deleting bool
	// ParentGone is true for a deleted sub-installation whose parent will
	// never hand it a deletion job (the parent is gone, or is being deleted
	// without its finalizer): it deletes itself as a root does, or its own
	// finalizer would never go.
	ParentGone bool
	// Operation is the value of the operation annotation ("" if none).
	Operation lsv1alpha1.Operation
	Phase     lsv1alpha1.Phase
	JobID     string
	// JobIDFinished is the last finished job.
	JobIDFinished string
}

// Action is what the reconcile does with the job.
type Action int

// Actions.
const (
	// Idle: no job is running and none starts.
	Idle Action = iota
	// Continue: run the current phase of the running job.
	Continue
	// StartNewJob: generate a job ID (root installations) and start at Phase.
	StartNewJob
	// StartHandedJob: a parent handed a job ID; start it at Phase.
	StartHandedJob
)

// Decision is the outcome.
type Decision struct {
	Action Action
	// Phase is the phase a starting job begins with.
	Phase lsv1alpha1.Phase
	// RemoveOperation asks to remove the operation annotation (it was consumed
	// or has no effect).
	RemoveOperation bool
	// IgnoredReconcile is set when a reconcile annotation on a non-root
	// installation was dropped.
	IgnoredReconcile bool
	// Postponed is set when a reconcile annotation waits for the running job.
	Postponed bool
}

// Running reports whether a job is running.
func (s State) Running() bool { return s.JobID != s.JobIDFinished }

// Started reports whether a running job has started: its phase is no longer
// the previous job's (see unstarted). A job handed over and not started yet
// may be replaced by another; a started one may not.
func (s State) Started() bool { return s.Running() && !unstarted(s.Phase) }

// IsDeletePhase reports whether p belongs to the deletion flow.
func IsDeletePhase(p lsv1alpha1.Phase) bool {
	switch p {
	case lsv1alpha1.PhaseInitDelete, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting, lsv1alpha1.PhaseDeleteFailed:
		return true
	}
	return false
}

// unstarted reports whether phase p, with a running job, means the job was
// just handed over and has not started yet: the phase is still that of the
// previous job (final) or there never was one.
func unstarted(p lsv1alpha1.Phase) bool { return p == "" || p.IsFinal() }

// Decide applies seed 002's start rules.
func Decide(s State) Decision {
	reconcile := s.Operation == lsv1alpha1.OperationReconcile
	// A deleted sub-installation whose parent is gone deletes itself as a
	// root does.
	ownDeletion := s.Deleting && s.ParentGone
	if !s.Root && !ownDeletion {
		d := Decision{}
		if reconcile {
			// Only root installations can be triggered by annotation.
			d.RemoveOperation, d.IgnoredReconcile = true, true
		}
		switch {
		case !s.Running():
			d.Action = Idle
		case s.Deleting && unstarted(s.Phase):
			// The parent hands a job to a deleted sub-installation to start its deletion flow.
			d.Action, d.Phase = StartHandedJob, lsv1alpha1.PhaseInitDelete
		case !s.Deleting && unstarted(s.Phase):
			d.Action, d.Phase = StartHandedJob, lsv1alpha1.PhaseInit
		default:
			d.Action = Continue
		}
		return d
	}

	if s.Running() {
		if unstarted(s.Phase) {
			// A job ID without a started phase (e.g. written by hand): start it.
			p := lsv1alpha1.PhaseInit
			if s.Deleting {
				p = lsv1alpha1.PhaseInitDelete
			}
			return Decision{Action: StartHandedJob, Phase: p}
		}
		// A running job is never interrupted by a reconcile annotation or a
		// deletion: both wait until it has finished.
		return Decision{Action: Continue, Postponed: reconcile}
	}
	if s.Deleting {
		if s.Phase == lsv1alpha1.PhaseDeleteFailed && !reconcile {
			// A failed deletion is retried only on request.
			return Decision{Action: Idle}
		}
		// The first delete needs no annotation.
		return Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInitDelete, RemoveOperation: reconcile}
	}
	if reconcile {
		return Decision{Action: StartNewJob, Phase: lsv1alpha1.PhaseInit, RemoveOperation: true}
	}
	return Decision{Action: Idle}
}
