package installation

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/jobs"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/status"
)

// Event reasons (filterable with --field-selector reason=...). Events are
// emitted for outcomes and problems only, after the status write that makes
// them: a job ending (Succeeded, Failed, DeleteFailed, Deleted), and an
// error. A job's start has no event (its trace, logs and
// terrace_jobs_started_total cover it). A job-ending (stalled) error emits its lastError reason (e.g. TemplateFailed,
// ImportNotFound) as a Warning beside the Failed/DeleteFailed transition; a
// normal error emits Retrying once per distinct error.
const (
	ReasonSucceeded          = "Succeeded"
	ReasonFailed             = "Failed"
	ReasonJobDeleteFailed    = "DeleteFailed"
	ReasonDeleted            = "Deleted"
	ReasonRetrying           = "Retrying"
	ReasonWaiting            = "Waiting"
	ReasonReconcileIgnored   = "ReconcileAnnotationIgnored"
	ReasonInterrupted        = "InterruptPropagated"
	ReasonSuccessorTriggered = "SuccessorTriggered"
)

// ReasonProgressing is the Ready reason of a running job that waits for
// nothing in particular (just started, or a wait is over).
const ReasonProgressing = "Progressing"

// lastError reasons of the errors that end a job.
const (
	ReasonBlueprintInvalid    = "BlueprintInvalid"
	ReasonContextNotFound     = "ContextNotFound"
	ReasonImportNotFound      = "ImportNotFound"
	ReasonImportInvalid       = "ImportInvalid"
	ReasonDataMappingFailed   = "DataMappingFailed"
	ReasonTemplateFailed      = "TemplateFailed"
	ReasonPredecessorFailed   = "PredecessorFailed"
	ReasonSubObjectsFailed    = "SubObjectsFailed"
	ReasonOrphansDeleteFailed = "OrphanDeletionFailed"
	ReasonSpecChanged         = "SpecChanged"
	ReasonImportsChanged      = "ImportsChanged"
	ReasonExportInvalid       = "ExportInvalid"
	ReasonDeleteFailed        = "SubObjectsDeleteFailed"
	ReasonTransient           = "TransientError"
)

// jobFailed ends the job Failed (DeleteFailed in the deletion flow) with
// err's reason and code: retrying cannot help.
func (r *Reconciler) jobFailed(ctx context.Context, s *scope, phase lsv1alpha1.Phase, err error) {
	inst, job := s.inst, s.inst.Status.JobID
	failed, transition := lsv1alpha1.PhaseFailed, ReasonFailed
	if jobs.IsDeletePhase(phase) {
		failed, transition = lsv1alpha1.PhaseDeleteFailed, ReasonJobDeleteFailed
	}
	err = s.secrets.redactErr(err)
	reason, msg := flow.ReasonOf(err, ""), status.Message(err.Error())
	logf.FromContext(ctx).Info("job failed", "reason", reason, "error", msg)
	took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
	status.SetLastErrorFields(&inst.Status.LastError, r.Now(), string(phase), reason, msg, flow.CodesOf(err)...)
	inst.Status.Phase = failed
	inst.Status.JobIDFinished = job
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionFalse, reason, msg)
	s.patch.OnStored(func() {
		r.metrics.JobFinished(string(failed), took)
		r.Recorder.Eventf(inst, nil, "Warning", reason, string(phase), "%s", msg)
		r.Recorder.Eventf(inst, nil, "Warning", transition, "Reconcile", "job %s ended %s in phase %s: %s", job, failed, phase, reason)
	})
	r.Rechecks.Forget(key(inst))
}

// phaseRetried records a transient error of the phase, which repeats; the
// controller's rate limiter makes the intervals grow. The event says so
// once per distinct error.
func (r *Reconciler) phaseRetried(s *scope, phase lsv1alpha1.Phase, err error) {
	inst := s.inst
	if readyIsWaiting(inst) {
		// The phase did not get to say whether it still waits: Ready must
		// not show the wait as current next to the error. Should the retry
		// wait again, its notice is not repeated (noticed).
		status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonProgressing,
			fmt.Sprintf("job %s is running: phase %s meets an error and is retried (see lastError)", inst.Status.JobID, phase))
	}
	// Transient errors carry no lastError code.
	msg := status.Message(s.secrets.redact(err.Error()))
	if status.SetLastErrorFields(&inst.Status.LastError, r.Now(), string(phase), ReasonTransient, msg) {
		s.patch.OnStored(func() {
			r.Recorder.Eventf(inst, nil, "Warning", ReasonRetrying, string(phase), "phase %s will be retried: %s", phase, msg)
		})
	}
}

// deleted reports the end of a deletion job that removed the finalizer (no
// status write follows).
func (r *Reconciler) deleted(s *scope) {
	inst, job := s.inst, s.inst.Status.JobID
	took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
	r.metrics.JobFinished(ReasonDeleted, took)
	r.Recorder.Eventf(inst, nil, "Normal", ReasonDeleted, "Delete", "job %s deleted every sub-object; finalizer removed", job)
}

// jobSucceeded ends the job Succeeded.
func (r *Reconciler) jobSucceeded(s *scope) {
	inst, job := s.inst, s.inst.Status.JobID
	took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
	inst.Status.JobIDFinished = job
	inst.Status.LastError = nil
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionTrue, ReasonSucceeded, fmt.Sprintf("job %s succeeded", job))
	s.patch.OnStored(func() {
		r.metrics.JobFinished(string(lsv1alpha1.PhaseSucceeded), took)
		r.Recorder.Eventf(inst, nil, "Normal", ReasonSucceeded, "Reconcile", "job %s succeeded", job)
	})
}

// readyIsWaiting reports whether the Ready condition says that a phase
// waits (reason Waiting).
func readyIsWaiting(inst *lsv1alpha1.Installation) bool {
	return status.ReasonOf(inst.Status.Conditions, status.ConditionReady) == ReasonWaiting
}

// jobEnds is a failure that ends the job (Failed, or DeleteFailed) although
// the configuration may be right: a sub-object failed, an interrupt, a
// deletion during the job. Stalled like a configuration problem (retrying
// cannot help; a new job can), with its own lastError code.
func jobEnds(reason string, code lsv1alpha1.ErrorCode, err error) *flow.Error {
	return &flow.Error{Kind: flow.Stalled, Reason: reason, Err: err, Codes: []lsv1alpha1.ErrorCode{code}}
}

// jobEndsf is jobEnds with a formatted message.
func jobEndsf(reason string, code lsv1alpha1.ErrorCode, format string, args ...any) *flow.Error {
	return jobEnds(reason, code, fmt.Errorf(format, args...))
}
