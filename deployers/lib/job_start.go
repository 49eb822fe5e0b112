package lib

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// startJob applies the start conditions of the contract (decideStart). A
// job that starts is worked on in this same reconcile: a synchronous
// deployer (the mock, a manifest apply that needs no waiting) writes the
// final phase in the one status write that also starts the job (Init is not
// written on its own: the first write shows Progressing, Succeeded or
// Failed). A job start is no outcome and no Event: the log line, the trace
// and terrace_jobs_started_total record it.
func (r *Reconciler) startJob(ctx context.Context, s *scope) (flow.Result, error) {
	di := s.item
	d := decideStart(di)
	s.removeAnnotations = append(s.removeAnnotations, d.remove...)
	if d.retryDelete {
		// A retried deletion gets a deadline of its own, as a first one does.
		r.startDeletion(s)
	}
	if d.dropForce {
		s.log.Info("ignoring operation: force-reconcile on a deploy item being deleted; the deletion goes on", "phase", di.Status.Phase)
	}
	if !d.begin {
		r.dropLeftoverPickup(s)
		return flow.Continue(), nil
	}
	s.started = true
	now := metav1.NewTime(r.now())
	if d.own {
		r.ownJob(ctx, s)
	}
	di.Status.Phase = lsv1alpha1.PhaseInit
	di.Status.LastReconcileTime = &now
	di.Status.ObservedGeneration = di.Generation
	di.Status.LastError = nil
	di.Status.Deployer = &lsv1alpha1.DeployerInformation{Name: r.opts.Name, Identity: r.opts.Identity, Version: r.opts.Version}
	setReady(s, metav1.ConditionFalse, ReasonJobStarted, "job started: "+d.why)
	if !controllerutil.ContainsFinalizer(di, lsv1alpha1.Finalizer) {
		s.addFinalizer = true
	}
	r.reportJobStarted(s, now.Time)
	s.log.Info("starting job", "jobID", di.Status.JobID, "reason", d.why, "generation", di.Generation)
	return flow.Continue(), nil
}

// ownJob gives a job the deployer starts itself a fresh ID, and a trace of
// its own (this reconcile's span is its root): the later reconciles continue
// it from the annotation, written with the metadata patch that follows the
// status write. The annotation only while tracing is on.
func (r *Reconciler) ownJob(ctx context.Context, s *scope) {
	di := s.item
	di.Status.JobID = jobid.New()
	if v, ok := tracing.ContextToWrite(ctx, di.Annotations); ok {
		s.setAnnotations = map[string]string{tracing.TraceContextAnnotation: v}
	}
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(di.Status.JobID))
}

// reportJobStarted queues the job's start metrics: the job clock, the
// started counter and, for a job handed over, the pickup latency.
func (r *Reconciler) reportJobStarted(s *scope, now time.Time) {
	di := s.item
	key, job := client.ObjectKeyFromObject(di), di.Status.JobID
	var latency time.Duration = -1
	if stamp, ok := di.Annotations[lsv1alpha1.ReconcileTimeAnnotation]; ok {
		// The execution handed the job over at the stamp (RFC 3339; the
		// fraction, when present, makes the latency exact).
		if t, err := time.Parse(time.RFC3339, stamp); err == nil {
			latency = max(now.Sub(t), 0)
		}
	}
	s.reports = append(s.reports, func() {
		r.clock.Start(key, job, now)
		r.metrics.JobStarted()
		if latency >= 0 {
			pickupLatency.WithLabelValues(r.opts.Name).Observe(latency.Seconds())
		}
	})
}

// inAJob reports whether the item is in a job whose trace its annotation
// holds: handed a job it has not finished, or being deleted.
func inAJob(di *lsv1alpha1.DeployItem) bool {
	return di.DeletionTimestamp != nil || jobid.HasNewJob(di.Status.JobID, di.Status.JobIDFinished)
}

func inJob(p lsv1alpha1.Phase) bool {
	return p == lsv1alpha1.PhaseInit || p == lsv1alpha1.PhaseProgressing || p == lsv1alpha1.PhaseDeleting
}

// Triggers of a job (the reasons in logs, events and the Ready condition).
const (
	triggerOperation  = "operation: reconcile"
	triggerExecution  = "new job from execution"
	triggerGeneration = "generation changed"
	triggerForce      = "operation: force-reconcile"
)

// start is the contract's decision about starting a job, computed from the
// item alone.
type start struct {
	// begin: a job starts (phase Init is written).
	begin bool
	// own: the deployer generates the job ID itself (not handed over).
	own bool
	// why is the trigger.
	why string
	// remove are annotations the decision consumes.
	remove []string
	// retryDelete: operation: reconcile on an item being deleted retries the deletion.
	retryDelete bool
	// dropForce: operation: force-reconcile on an item being deleted is dropped.
	dropForce bool
}

// decideStart applies the start conditions of the brief.
func decideStart(di *lsv1alpha1.DeployItem) start {
	_, handedOver := di.Annotations[lsv1alpha1.ReconcileTimeAnnotation]
	op := lsv1alpha1.Operation(di.Annotations[lsv1alpha1.OperationAnnotation])
	if di.DeletionTimestamp != nil {
		// Deletion is handled by the Delete step; a pending reconcile-time is
		// moot then, and removing it keeps the pickup timeout from firing.
		var d start
		if handedOver {
			d.remove = append(d.remove, lsv1alpha1.ReconcileTimeAnnotation)
		}
		// operation: reconcile on an item being deleted retries the deletion.
		switch op {
		case lsv1alpha1.OperationReconcile:
			d.remove = append(d.remove, lsv1alpha1.OperationAnnotation)
			d.retryDelete = true
		case lsv1alpha1.OperationForceReconcile:
			// Nothing is re-applied on an item being deleted: the request is
			// dropped (see startJob's log line), the deletion goes on.
			d.remove = append(d.remove, lsv1alpha1.OperationAnnotation)
			d.dropForce = true
		}
		return d
	}
	_, managed := di.Labels[lsv1alpha1.ManagedByExecutionLabel]
	phase := di.Status.Phase
	newJob := jobid.HasNewJob(di.Status.JobID, di.Status.JobIDFinished)

	var d start
	switch {
	case op == lsv1alpha1.OperationReconcile:
		d.remove = append(d.remove, lsv1alpha1.OperationAnnotation)
		if phase == lsv1alpha1.PhaseInit {
			// A job has just started and done no work yet: the annotation is
			// satisfied by it (also covers reading our own start from a stale cache).
			return d
		}
		d.own, d.why = true, triggerOperation
	case newJob && phase == lsv1alpha1.PhaseInit && handedOver:
		// A job has started and done no work yet; the work that follows
		// finishes whatever job is current then. Only the pickup is recorded.
		// (This is also what a reconcile sees that reads our own Init write
		// from the cache before the annotation removal.)
		return start{remove: []string{lsv1alpha1.ReconcileTimeAnnotation}}
	case newJob && (!inJob(phase) || handedOver):
		d.why = triggerExecution
	case !managed && di.Generation != di.Status.ObservedGeneration && !inJob(phase):
		d.own, d.why = true, triggerGeneration
	case op == lsv1alpha1.OperationForceReconcile && !inJob(phase):
		// The annotation stays until ForceReconcile runs in the next reconcile.
		d.own, d.why = true, triggerForce
	default:
		return start{}
	}
	d.begin = true
	if handedOver {
		d.remove = append(d.remove, lsv1alpha1.ReconcileTimeAnnotation)
	}
	return d
}

// leftoverPickupGrace is how old a reconcile-time stamp on a finished item
// must be before dropLeftoverPickup takes it for a leftover. The execution
// writes the stamp of a new job right before the job's ID (two writes in one
// reconcile); a stamp that young may be that job's, whose ID is on its way.
const leftoverPickupGrace = 5 * time.Second

// dropLeftoverPickup removes a reconcile-time stamp that a finished job left
// behind. The stamp is removed with the metadata patch that follows the
// status write ending a job (on an item that already has the finalizer);
// when that patch fails (a conflict, an API error, the deployer stopping
// between the two writes) the item is Succeeded or Failed, jobIDFinished ==
// jobID, and still carries the stamp, which no later job start removes:
// the execution controller would fail the item with PickupTimeout. A stamp
// is a leftover when it is not newer than the finished job's start
// (lastReconcileTime, which has second precision: a stamp within the same
// second counts as not newer) and older than leftoverPickupGrace; a younger
// one is looked at again once it is that old. A stamp newer than the job's
// start is a new job's, handed over before its ID is written, and stays.
// Only reconciles that start no job get here, and only an item carrying a
// stamp costs anything (one annotation removal, with the reconcile's
// metadata patch).
func (r *Reconciler) dropLeftoverPickup(s *scope) {
	di := s.item
	stamp, ok := di.Annotations[lsv1alpha1.ReconcileTimeAnnotation]
	if !ok || di.DeletionTimestamp != nil || di.Status.LastReconcileTime == nil || inJob(di.Status.Phase) {
		return
	}
	t, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return // the execution controller reports a malformed stamp
	}
	if !jobid.LeftoverPickupStamp(di.Status.JobID, di.Status.JobIDFinished, di.Status.LastReconcileTime.Time, t) {
		return // a job not finished, or a stamp newer than its pickup: a new job is being handed over
	}
	if age := r.now().Sub(t); age < leftoverPickupGrace {
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: leftoverPickupGrace - age})
		return
	}
	s.log.Info("removing a reconcile-time stamp left over from a finished job", "stamp", stamp,
		"jobIDFinished", di.Status.JobIDFinished, "lastReconcileTime", di.Status.LastReconcileTime.UTC().Format(time.RFC3339))
	s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.ReconcileTimeAnnotation)
}
