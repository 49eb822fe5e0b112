package installation

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/jobs"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// startsNewJobNow reports whether this reconcile starts a new job that
// consumes the reconcile annotation: the finalizer then goes into the same
// metadata patch as the annotation's removal.
func startsNewJobNow(inst *lsv1alpha1.Installation) bool {
	d := jobs.Decide(jobState(inst))
	return d.Action == jobs.StartNewJob && d.RemoveOperation
}

// ensureFinalizer adds the finalizer to an installation not being deleted.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (flow.Result, error) {
	if s.inst.DeletionTimestamp != nil || controllerutil.ContainsFinalizer(s.inst, lsv1alpha1.Finalizer) {
		return flow.Continue(), nil
	}
	if startsNewJobNow(s.inst) {
		// Added together with the annotation's removal, in the metadata
		// patch right before the new job's first status write (startJob).
		return flow.Continue(), nil
	}
	return flow.Continue(), s.track(func() error {
		return patchMeta(ctx, r.Client, s.inst, nil, []string{lsv1alpha1.Finalizer})
	})
}

// startJob applies the start rules (package jobs) and starts a job when they say so.
func (r *Reconciler) startJob(ctx context.Context, s *scope) (flow.Result, error) {
	d, err := r.decide(ctx, s.inst)
	if err != nil {
		return flow.Stop(), err
	}
	if res, err := r.prepareStart(ctx, s, d); err != nil || res.Stopped() {
		return res, err
	}
	d, resumed := r.resumeLostStart(ctx, s.inst, d)
	switch d.Action {
	case jobs.Idle:
		r.hintNewJobAfterFailure(s)
		return flow.Stop(), nil
	case jobs.Continue:
		return flow.Continue(), nil
	case jobs.StartNewJob:
		s.inst.Status.JobID = newJobID(s.inst)
	}
	r.recordStart(ctx, s, d)
	if d.Phase == lsv1alpha1.PhaseInit {
		r.consumeWithFirstWrite(s, d, resumed)
		return flow.Continue(), nil
	}
	return r.writeDeletionStart(ctx, s, d)
}

// decide applies the start rules to the installation as read.
func (r *Reconciler) decide(ctx context.Context, inst *lsv1alpha1.Installation) (jobs.Decision, error) {
	state := jobState(inst)
	if state.Deleting && !state.Root {
		// From the cache: see jobid.ParentGone.
		gone, err := jobid.ParentGone(ctx, r.Client, inst)
		if err != nil {
			return jobs.Decision{}, err
		}
		state.ParentGone = gone
	}
	return jobs.Decide(state), nil
}

// prepareStart writes what goes before a job's start: a root's trace context
// and the removal of a reconcile annotation that starts no new job.
func (r *Reconciler) prepareStart(ctx context.Context, s *scope, d jobs.Decision) (flow.Result, error) {
	inst := s.inst
	starting := d.Action == jobs.StartNewJob || d.Action == jobs.StartHandedJob
	if starting && isRoot(inst) {
		// The reconcile span is the root of the job's trace: every later
		// reconcile of the job continues it from the annotation. Written
		// before anything else of the job, so no reconcile of the job can
		// miss it; a conflict means the cache was stale.
		if err := s.track(func() error { return r.writeOwnTraceContext(ctx, inst) }); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				logf.FromContext(ctx).V(1).Info("installation changed before the job started", "error", err.Error())
				return flow.Stop().RequeueAfter(time.Second), nil
			}
			return flow.Stop(), fmt.Errorf("writing the trace context: %w", err)
		}
	}
	if d.RemoveOperation && d.Action != jobs.StartNewJob {
		if err := s.track(func() error {
			return patchAnnotations(ctx, r.Client, inst, map[string]*string{lsv1alpha1.OperationAnnotation: nil})
		}); err != nil {
			return flow.Stop(), err
		}
	}
	if d.IgnoredReconcile {
		r.Recorder.Eventf(inst, nil, "Normal", ReasonReconcileIgnored, "Reconcile", "the reconcile annotation only starts jobs on root installations; removed")
	}
	if d.Postponed && inst.Status.Phase != "" {
		logf.FromContext(ctx).V(1).Info("reconcile annotation postponed until the running job finishes")
	}
	return flow.Continue(), nil
}

// resumeLostStart turns an idle decision into the start of a job whose
// reconcile annotation was consumed but whose start never reached the
// status (startLost): same ID unless the spec changed since, sub-objects
// found done as far as they got.
func (r *Reconciler) resumeLostStart(ctx context.Context, inst *lsv1alpha1.Installation, d jobs.Decision) (jobs.Decision, bool) {
	if d.Action != jobs.Idle || !startLost(inst) {
		return d, false
	}
	logf.FromContext(ctx).Info("resuming a job whose start was not written", "startedJobID", inst.Annotations[StartedJobAnnotation])
	return jobs.Decision{Action: jobs.StartNewJob, Phase: lsv1alpha1.PhaseInit}, true
}

// recordStart sets the status of a job's start; its write is guarded: it
// carries the resourceVersion read, so a stale cache can never start a job
// twice.
func (r *Reconciler) recordStart(ctx context.Context, s *scope, d jobs.Decision) {
	inst := s.inst
	s.patch.Guard()
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(inst.Status.JobID))
	inst.Status.Phase = d.Phase
	inst.Status.ObservedGeneration = inst.Generation
	inst.Status.LastError = nil
	// Ready turns Unknown now (removed first, so its transition time is the
	// job's start even if the previous job left it Unknown).
	apimeta.RemoveStatusCondition(&inst.Status.Conditions, status.ConditionReady)
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonProgressing, fmt.Sprintf("job %s started", inst.Status.JobID))
	r.Rechecks.Forget(key(inst))
	job, started := inst.Status.JobID, r.Now()
	s.patch.OnStored(func() {
		r.clock.Start(key(inst), job, started)
		r.metrics.JobStarted()
	})
}

// consumeWithFirstWrite: an install job's start goes out with the status
// write of the phases that run now (one write instead of two). Should that
// write conflict or never happen after sub-objects were created or handed
// the job, the next reconcile reads the same state, derives the same job ID
// (newJobID) and finds that work done already.
func (r *Reconciler) consumeWithFirstWrite(s *scope, d jobs.Decision, resumed bool) {
	inst := s.inst
	consume := d.RemoveOperation || (resumed && inst.Annotations[StartedJobAnnotation] != inst.Status.JobID)
	if !consume || !isRoot(inst) {
		return
	}
	// A root's reconcile annotation is consumed in one guarded metadata
	// patch with the finalizer and the started-job record that keeps the
	// request from being lost (startLost). It goes right before the status
	// write, not before the phases: the execution's create and hand-over do
	// not wait for it, and a reconcile repeated before it derives the same
	// job. A resumed start whose spec changed since it was consumed runs
	// under a new ID (newJobID): the record follows it, or the job would
	// count as lost again once it ended.
	job := inst.Status.JobID
	s.beforeStatus = func(ctx context.Context) error {
		return s.track(func() error { return r.consumeAnnotation(ctx, s.inst, job) })
	}
}

// writeDeletionStart writes a deletion job's start now, guarded, before
// anything is deleted (it shows InitDelete first); a reconcile annotation
// that restarts a failed deletion is consumed only after that write, so the
// request is never lost. The phases run in this reconcile.
func (r *Reconciler) writeDeletionStart(ctx context.Context, s *scope, d jobs.Decision) (flow.Result, error) {
	if err := s.patch.Flush(ctx, s.inst); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			logf.FromContext(ctx).V(1).Info("installation changed before the job started", "error", err.Error())
			return flow.Stop().RequeueAfter(time.Second), nil
		}
		return flow.Stop(), err
	}
	if d.RemoveOperation {
		if err := s.track(func() error { return r.consumeAnnotation(ctx, s.inst, "") }); err != nil {
			return flow.Stop(), err
		}
	}
	return flow.Continue(), nil
}

// newJobID derives the ID of a new job from the state it starts from: the
// installation's UID, previous job, whether it is being deleted (the
// previous job makes every job's ID its own) and its spec's generation. A
// reconcile repeated from the same state starts the same job; one repeated
// after the spec changed starts another. A start whose annotation consume
// conflicted with a spec edit has handed its job to the execution and the
// sub-installations with the old spec already: the retry, deriving the same
// job, would find that hand-over done and let the sub-objects finish the
// job with the spec the installation no longer has, yet report it as run
// for the new generation. A new ID hands the new spec over as a new job.
func newJobID(inst *lsv1alpha1.Installation) string {
	return jobIDAt(inst, inst.Generation)
}

func jobIDAt(inst *lsv1alpha1.Installation, generation int64) string {
	return jobid.Derive(string(inst.UID), inst.Status.JobID, inst.Status.JobIDFinished,
		strconv.FormatBool(inst.DeletionTimestamp != nil), strconv.FormatInt(generation, 10))
}

// maxLostStartGenerations bounds how many spec generations startLost looks
// back (each is one hash).
const maxLostStartGenerations = 1000

// startLost reports whether a reconcile annotation was consumed for a job
// (StartedJobAnnotation) that the status does not show: a job the
// installation's current status would start next, at the current
// generation or one the spec had since the last job started (the spec may
// have been edited after the consume). Deletion jobs never count (their
// start is written before the annotation is consumed).
func startLost(inst *lsv1alpha1.Installation) bool {
	started := inst.Annotations[StartedJobAnnotation]
	if started == "" || !isRoot(inst) || inst.DeletionTimestamp != nil || started == inst.Status.JobID {
		return false
	}
	if started == newJobID(inst) {
		return true
	}
	oldest := max(inst.Status.ObservedGeneration, 1, inst.Generation-maxLostStartGenerations)
	for gen := inst.Generation - 1; gen >= oldest; gen-- {
		if started == jobIDAt(inst, gen) {
			return true
		}
	}
	return false
}

// consumeAnnotation removes the reconcile annotation and adds the finalizer
// (unless present or the installation is being deleted) in one metadata
// patch. With a started job it also records that job (StartedJobAnnotation)
// and is always guarded by the resourceVersion read; otherwise only when it
// changes the finalizers (a merge patch replaces that list as a whole).
func (r *Reconciler) consumeAnnotation(ctx context.Context, inst *lsv1alpha1.Installation, started string) error {
	meta := map[string]any{}
	annotations := map[string]any{}
	if _, ok := inst.Annotations[lsv1alpha1.OperationAnnotation]; ok {
		annotations[lsv1alpha1.OperationAnnotation] = nil
	}
	if started != "" {
		annotations[StartedJobAnnotation] = started
		meta["resourceVersion"] = inst.ResourceVersion
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if inst.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(inst, lsv1alpha1.Finalizer) {
		meta["finalizers"] = append(slices.Clone(inst.Finalizers), lsv1alpha1.Finalizer)
		meta["resourceVersion"] = inst.ResourceVersion
	}
	if len(meta) == 0 {
		return nil
	}
	computed := inst.Status.DeepCopy()
	err := r.Client.Patch(ctx, inst, mergePatch{"metadata": meta}, client.FieldOwner(FieldManager))
	// The status stays as this reconcile computed it (the response holds the
	// same, written just before).
	inst.Status = *computed
	if err != nil {
		return fmt.Errorf("removing the reconcile annotation of %s: %w", inst.Name, err)
	}
	return nil
}
