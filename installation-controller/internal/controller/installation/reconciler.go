// Package installation reconciles Installations with seed 002's phase
// machine: a job starts on a root installation (operation: reconcile, or its
// deletion) or arrives from a parent (status.jobID), walks the installation
// flow (Init → CleanupOrphaned → ObjectsCreated → Progressing → Completing →
// Succeeded/Failed) or the deletion flow (InitDelete → TriggerDelete →
// Deleting → gone/DeleteFailed), and ends with jobIDFinished = jobID.
//
// A reconcile runs every phase that needs no waiting one after the other
// (Init → CleanupOrphaned → ObjectsCreated → Progressing, Progressing →
// Completing → Succeeded) and writes the status once at its end; a job's
// start is written first on its own, guarded by the resourceVersion read, so
// a stale cache can never start a job twice. Sub-objects are only ever met
// through the API: the controller writes an Execution's spec and hands it a
// job by applying status.jobID with its own field manager.
package installation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/jobs"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "installation"

// FieldManager is the field manager of every write of this controller.
const FieldManager = "installation-controller"

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

// Options configure the controller.
type Options struct {
	// Controller overrides the manager's controller defaults (concurrency,
	// panic recovery); the zero value keeps them.
	Controller controller.Options
	// Rechecks spaces out the re-checks of a waiting phase; nil means the
	// default (500 ms, doubling up to one minute). Re-checks are a safety
	// net for a missed event: tests set one that never fires in time, so
	// every wait they pass was ended by a watch event.
	Rechecks workqueue.TypedRateLimiter[types.NamespacedName]
}

// AddToManager registers the Installation reconciler with mgr.
func AddToManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(FieldManager),
		Rechecks:  opts.Rechecks,
	}
	return r.SetupWithManager(ctx, mgr, opts.Controller)
}

// Least privilege for this reconciler (collected into the binary's ClusterRole
// by make generate-rbac). Secrets and ConfigMaps are only read with get, one
// import at a time, so the controller never needs to list or watch them.
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations/finalizers,verbs=update
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=dataobjects,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=targets,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=contexts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconciler reconciles Installations.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads Secrets and ConfigMaps directly: caching every Secret
	// of the cluster for the few an installation imports is not worth it
	// (and would need list/watch on Secrets).
	APIReader client.Reader
	// Recorder emits events on installations.
	Recorder events.EventRecorder
	// Now returns the current time; tests may replace it.
	Now func() time.Time

	// Rechecks spaces out the re-checks of a waiting phase (Progressing,
	// predecessors, successors) with growing intervals; events normally
	// arrive first, the re-check only covers missed ones. Nil: 500 ms,
	// doubling up to one minute.
	Rechecks workqueue.TypedRateLimiter[types.NamespacedName]
	// metrics records the shared job and phase metrics (kind Installation).
	metrics metrics.Recorder
	// clock times jobs for terrace_job_duration_seconds.
	clock metrics.JobClock
	// ownWrites remembers the resourceVersions of each installation that
	// this controller's own writes replaced (kit/stale): a reconcile that
	// reads one of them from the cache is skipped (the watch event of the
	// write, which has not arrived yet, triggers the next one), so a lagging
	// cache never re-runs phases already written.
	ownWrites stale.Versions
	// unknownOps remembers the unknown operation annotation values already
	// warned about (operations.go).
	unknownOps unknownop.Tracker
	// gone remembers the sub-installations of a job confirmed gone
	// (confirmMissing), so they are read and reported once per job.
	gone goneSubs
	// waits remembers the DataObjects and Targets the running jobs wait for
	// to go (nameTaken), whose events wake them.
	waits nameWaits
	// noticed remembers the last wait whose notice (event) was sent.
	noticed noticedWaits
}

// SetupWithManager checks the reconciler's inputs, registers the field
// indexes and the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := setup.Check("installation", setup.Required("Client", r.Client),
		setup.Required("APIReader", r.APIReader), setup.Required("Recorder", r.Recorder)); err != nil {
		return err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Rechecks == nil {
		r.Rechecks = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](500*time.Millisecond, time.Minute)
	}
	r.metrics = metrics.For(Kind)
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ImportsIndex, indexImports); err != nil {
		return fmt.Errorf("indexing installations by imports: %w", err)
	}
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ExportsIndex, indexExports); err != nil {
		return fmt.Errorf("indexing installations by exports: %w", err)
	}
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ParentIndex, indexParent); err != nil {
		return fmt.Errorf("indexing installations by parent: %w", err)
	}
	for _, obj := range []client.Object{&lsv1alpha1.DataObject{}, &lsv1alpha1.Target{}} {
		if err := idx.IndexField(ctx, obj, WriterIndex, indexWriter); err != nil {
			return fmt.Errorf("indexing %T by writer: %w", obj, err)
		}
	}
	// Contexts are read through the cache but watched by nothing: start
	// their informer with the manager, so the first job that reads one does
	// not wait for it to start and sync.
	if _, err := mgr.GetCache().GetInformer(ctx, &lsv1alpha1.Context{}); err != nil {
		return fmt.Errorf("starting the Context informer: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(opts).
		// Status matters (a parent hands a job over in status.jobID), so no
		// generation filter.
		For(&lsv1alpha1.Installation{}).
		Owns(&lsv1alpha1.Execution{}).
		Owns(&lsv1alpha1.Installation{}).
		// A finished predecessor raises a reconcile event for its successors.
		Watches(&lsv1alpha1.Installation{}, handler.EnqueueRequestsFromMapFunc(r.successorsOf)).
		// An installation that is gone wakes its predecessors (one being
		// deleted waits in InitDelete until its successors are gone) and its
		// children (a deleted child waiting for its deletion job runs its
		// own once its parent went without handing one over).
		Watches(&lsv1alpha1.Installation{}, handler.Funcs{DeleteFunc: r.wakeOnDeletion}).
		// An import appearing or changing wakes its importers; an object
		// going wakes the jobs waiting for its name.
		Watches(&lsv1alpha1.DataObject{}, handler.EnqueueRequestsFromMapFunc(r.importersAndWaiters(dataKey))).
		Watches(&lsv1alpha1.Target{}, handler.EnqueueRequestsFromMapFunc(r.importersAndWaiters(targetKey))).
		Complete(r)
}

func (r *Reconciler) successorsOf(ctx context.Context, o client.Object) []ctrl.Request {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	return r.requestsFor(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
}

// wakeOnDeletion enqueues, for a deleted installation, the installations
// that export what it imported and its sub-installations.
func (r *Reconciler) wakeOnDeletion(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	inst, ok := e.Object.(*lsv1alpha1.Installation)
	if !ok {
		return
	}
	for _, req := range r.requestsFor(ctx, inst.Namespace, ExportsIndex, importKeys(inst), inst.Name) {
		q.Add(req)
	}
	for _, req := range r.requestsFor(ctx, inst.Namespace, ParentIndex, []string{inst.Name}, inst.Name) {
		q.Add(req)
	}
}

// importersAndWaiters maps a DataObject or Target to the installations
// importing it and to those whose job waits for it to go (nameWaits): its
// deletion frees the name their export or context copy is written under.
func (r *Reconciler) importersAndWaiters(key func(string) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		k := key(o.GetName())
		reqs := r.requestsFor(ctx, o.GetNamespace(), ImportsIndex, []string{k}, "")
		return append(reqs, r.waits.waiters(o.GetNamespace(), k)...)
	}
}

func (r *Reconciler) requestsFor(ctx context.Context, ns, index string, keys []string, except string) []ctrl.Request {
	seen := map[string]bool{}
	var reqs []ctrl.Request
	for _, k := range keys {
		list := &lsv1alpha1.InstallationList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{index: k}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing installations by index", "index", index, "key", k)
			continue
		}
		for i := range list.Items {
			n := list.Items[i].Name
			if n != except && !seen[n] {
				seen[n] = true
				reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}})
			}
		}
	}
	return reqs
}

// scope is the state of one reconcile.
type scope struct {
	inst *lsv1alpha1.Installation
	// patch writes the status this reconcile computed, once, at its end (a
	// deletion job's start before anything is deleted), and records the
	// resourceVersions its writes replaced in r.ownWrites.
	patch *status.Patcher
	// gone is set when the finalizer was removed: no status write.
	gone bool
	// fresh holds the sub-objects this reconcile created or wrote, as the
	// API server returned them: the cache may not show them yet when the
	// next phase runs in the same reconcile ("Execution/<name>",
	// "Installation/<name>").
	fresh map[string]client.Object
	// deleted is set when a phase deleted sub-objects: the cache may still
	// show them without deletionTimestamp, so the next phase waits for the
	// next reconcile.
	deleted bool
	// handDeleted names the sub-objects this job renders that someone
	// deleted by hand (Init hands them this job's deletion and waits until
	// they are gone, then creates them again).
	handDeleted []string
	// orphansGoing names the orphans this job deleted in an earlier
	// reconcile of Init (the execution, once the blueprint renders no
	// deploy items) that Init, run again after a wait, finds on their way
	// out: it hands them the deletion and waits as for handDeleted, but
	// they are not created again.
	orphansGoing []string
	// beforeStatus runs right before the status write (the guarded metadata
	// patch that consumes a root's reconcile annotation); when it fails,
	// nothing more is written by this reconcile.
	beforeStatus func(context.Context) error
	// interrupted is set when an interrupt annotation reached a job in
	// Init: phaseInit ends the job Failed (Interrupted).
	interrupted bool
}

// track runs write, a write of the installation that updates s.inst from
// its response, and records the resourceVersion it replaced.
func (s *scope) track(write func() error) error { return s.patch.Track(s.inst, write) }

// remember records a sub-object as this reconcile last wrote it.
func (s *scope) remember(o client.Object) {
	if s.fresh == nil {
		s.fresh = map[string]client.Object{}
	}
	kind := "Installation"
	if _, ok := o.(*lsv1alpha1.Execution); ok {
		kind = "Execution"
	}
	s.fresh[kind+"/"+o.GetName()] = o
}

// Reconcile runs the steps and writes the installation's status once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	inst := &lsv1alpha1.Installation{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			// Not in forget: after a deletion job removed the finalizer the
			// cache may still show the installation with its annotation,
			// which must not be warned about again.
			r.unknownOps.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.ownWrites.Stale(req.NamespacedName, inst.ResourceVersion) {
		logf.FromContext(ctx).V(1).Info("cache older than this controller's last write; waiting for its event", "resourceVersion", inst.ResourceVersion)
		return ctrl.Result{}, nil
	}
	if deletionDone(inst) {
		// Its deletion job is over; the installation waits only for other
		// finalizers (a user's). Running Deleting again would delete the
		// context objects again (two DeleteAllOf requests) and report the
		// deletion again (event, metric) on every reconcile, say each time
		// an annotation changes.
		logf.FromContext(ctx).V(1).Info("deleted; waiting for other finalizers", "finalizers", inst.Finalizers)
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	r.warnUnknownOperation(ctx, inst)
	// One job is one trace: continue the trace handed over in the
	// annotation, or start a new one when this reconcile starts a root job
	// or belongs to no job (reconcileTrace).
	traced, job := reconcileTrace(inst)
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, traced, job)
	defer func() { tracing.EndReconcile(span, string(inst.Status.Phase), retErr) }()
	log := logf.FromContext(ctx).WithValues("jobID", inst.Status.JobID, "phase", inst.Status.Phase)
	ctx = logf.IntoContext(ctx, log)
	patch, err := status.NewPatcher(r.Client, inst, status.FieldOwner(FieldManager), status.RecordWrites(&r.ownWrites))
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{inst: inst, patch: patch}
	defer func() { res, retErr = r.finish(ctx, s, res, retErr) }()
	out, err := flow.Run(ctx, s,
		r.ensureFinalizer,
		r.handleInterrupt,
		r.startJob,
		r.runPhase,
	)
	return out.Ctrl(), err
}

// finish writes the status the steps computed and ends the reconcile: a
// status write that lost a race is retried on the newer copy (its event
// normally comes first); a gone installation is forgotten.
func (r *Reconciler) finish(ctx context.Context, s *scope, res ctrl.Result, err error) (ctrl.Result, error) {
	if werr := r.writeStatus(ctx, s); werr != nil {
		if apierrors.IsConflict(werr) || apierrors.IsNotFound(werr) {
			// The installation moved on; its new version triggers us again.
			logf.FromContext(ctx).V(1).Info("installation changed during reconcile", "error", werr.Error())
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return res, errors.Join(err, werr)
	}
	if s.gone {
		r.forget(key(s.inst))
		return res, err
	}
	r.metrics.Phase(s.inst.Namespace, s.inst.Name, string(s.inst.Status.Phase))
	return res, err
}

// writeStatus writes the status when it changed (a merge patch of the
// changed fields, so fields this reconcile did not touch are never written),
// right after beforeStatus; nothing after the finalizer went, nor after an
// earlier write of this reconcile failed.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	if s.gone || s.patch.Failed() {
		return nil
	}
	if f := s.beforeStatus; f != nil {
		s.beforeStatus = nil
		if err := f(ctx); err != nil {
			s.patch.Skip()
			return err
		}
	}
	return s.patch.Patch(ctx, s.inst)
}

// deletionDone reports whether the deletion job of an installation being
// deleted is over: phase Deleting removes Terrace's finalizer last, and
// writes no status after it (a status write would be one request more on
// every deletion), so an installation other finalizers keep shows phase
// Deleting without it. One whose finalizer was removed by hand in Deleting
// counts as done too: whoever removed it took the deletion over. An earlier
// phase without the finalizer (a root deleted before its first job added
// it) still runs its deletion job.
func deletionDone(inst *lsv1alpha1.Installation) bool {
	return inst.DeletionTimestamp != nil && inst.Status.Phase == lsv1alpha1.PhaseDeleting &&
		!controllerutil.ContainsFinalizer(inst, lsv1alpha1.Finalizer)
}

// forget drops what the controller keeps about an installation that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key.Namespace, key.Name)
	r.clock.Forget(key)
	r.ownWrites.Forget(key)
	r.gone.forget(key)
	r.waits.set(key, nil)
	r.noticed.forget(key)
	if r.Rechecks != nil {
		r.Rechecks.Forget(key)
	}
}

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

func key(inst *lsv1alpha1.Installation) types.NamespacedName {
	return types.NamespacedName{Namespace: inst.Namespace, Name: inst.Name}
}

// phaseFunc is one phase of the job: it returns the phase to move to, or a
// flow error: Waiting (what it waits for: waitError), Stalled (the job ends
// Failed or DeleteFailed), anything else is retried. phaseDeleting sets
// s.gone instead of a next phase.
type phaseFunc func(context.Context, *scope) (lsv1alpha1.Phase, error)

func (r *Reconciler) phaseFunc(p lsv1alpha1.Phase) phaseFunc {
	switch p {
	case lsv1alpha1.PhaseInit:
		return r.phaseInit
	case lsv1alpha1.PhaseCleanupOrphaned:
		return r.phaseCleanupOrphaned
	case lsv1alpha1.PhaseObjectsCreated:
		return r.phaseObjectsCreated
	case lsv1alpha1.PhaseProgressing:
		return r.phaseProgressing
	case lsv1alpha1.PhaseCompleting:
		return r.phaseCompleting
	case lsv1alpha1.PhaseInitDelete:
		return r.phaseInitDelete
	case lsv1alpha1.PhaseTriggerDelete:
		return r.phaseTriggerDelete
	case lsv1alpha1.PhaseDeleting:
		return r.phaseDeleting
	}
	return nil
}

// runPhase runs the phases of the running job, each in a span of its own
// ("Installation.<Phase>"), as long as the next may run in this reconcile
// (chains): the job is handed to sub-objects from there.
func (r *Reconciler) runPhase(ctx context.Context, s *scope) (flow.Result, error) {
	for {
		res, again, err := r.runOnePhase(ctx, s)
		if !again {
			return res, err
		}
	}
}

// chains reports whether the phase entered may run in the same reconcile:
// every phase that does not need the cache to show deletions of this
// reconcile.
func chains(s *scope, p lsv1alpha1.Phase) bool {
	if s.deleted {
		return false
	}
	switch p {
	case lsv1alpha1.PhaseCleanupOrphaned, lsv1alpha1.PhaseObjectsCreated, lsv1alpha1.PhaseProgressing,
		lsv1alpha1.PhaseCompleting, lsv1alpha1.PhaseTriggerDelete, lsv1alpha1.PhaseDeleting:
		return true
	}
	return false
}

// runOnePhase runs the current phase and applies what it decided; again
// says the next phase runs in the same reconcile.
func (r *Reconciler) runOnePhase(ctx context.Context, s *scope) (flow.Result, bool, error) {
	phase := s.inst.Status.Phase
	fn := r.phaseFunc(phase)
	if fn == nil {
		return flow.Stop(), false, nil
	}
	next, err := r.runTraced(ctx, s, phase, fn)
	switch {
	case flow.IsStalled(err):
		r.jobFailed(ctx, s, phase, err)
		return flow.Stop(), false, nil
	case flow.IsWaiting(err):
		return r.phaseWaits(ctx, s, phase, waitOf(err)), false, nil
	case err != nil:
		r.phaseRetried(s, phase, err)
		return flow.Stop(), false, err
	case s.gone:
		r.deleted(s)
		return flow.Stop(), false, nil
	}
	return r.enter(ctx, s, phase, next)
}

// runTraced runs fn in the phase's span and records what it waits for.
func (r *Reconciler) runTraced(ctx context.Context, s *scope, phase lsv1alpha1.Phase, fn phaseFunc) (lsv1alpha1.Phase, error) {
	pctx, span := tracing.StartStep(ctx, tracer(), Kind, string(phase), tracing.AttrPhase.String(string(phase)))
	next, err := fn(pctx, s)
	w := waitOf(err)
	// Recorded anew on every run of a phase, so the record goes with the
	// wait.
	r.waits.set(key(s.inst), w.object())
	spanErr := err
	if w != nil {
		span.SetAttributes(AttrWaitingFor.String(w.msg))
		// A wait is no failure of the phase.
		spanErr = nil
	}
	tracing.EndStep(span, spanErr)
	return next, err
}

// jobFailed ends the job Failed (DeleteFailed in the deletion flow) with
// err's reason and code: retrying cannot help.
func (r *Reconciler) jobFailed(ctx context.Context, s *scope, phase lsv1alpha1.Phase, err error) {
	inst, job := s.inst, s.inst.Status.JobID
	failed, transition := lsv1alpha1.PhaseFailed, ReasonFailed
	if jobs.IsDeletePhase(phase) {
		failed, transition = lsv1alpha1.PhaseDeleteFailed, ReasonJobDeleteFailed
	}
	reason, msg := flow.ReasonOf(err, ""), err.Error()
	logf.FromContext(ctx).Info("job failed", "reason", reason, "error", msg)
	took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
	status.SetLastError(&inst.Status.LastError, r.Now(), string(phase), err, "")
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
	if status.SetLastErrorFields(&inst.Status.LastError, r.Now(), string(phase), ReasonTransient, err.Error()) {
		msg := err.Error()
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

// phaseWaits records what the phase waits for and asks for a re-check, a
// safety net for a missed event.
func (r *Reconciler) phaseWaits(ctx context.Context, s *scope, phase lsv1alpha1.Phase, w *waitFor) flow.Result {
	inst, job := s.inst, s.inst.Status.JobID
	log := logf.FromContext(ctx)
	if r.wentMeanwhile(ctx, inst.Namespace, w.on) {
		// The object went between the phase's read and the record of the
		// wait, whose wake-up it may have missed: the phase runs again at
		// once instead of waiting for a re-check.
		log.V(1).Info("what the phase would wait for is gone already; running it again", "for", w.msg)
		return flow.Stop().RequeueAfter(time.Millisecond)
	}
	delay := r.Rechecks.When(key(inst))
	log.V(1).Info("waiting", "for", w.msg, "recheckAfter", delay)
	// Say what the job waits for (written only when it changes), so a
	// stall is never silent.
	msg := fmt.Sprintf("phase %s waits for %s", phase, w.msg)
	news := !status.Has(inst.Status.Conditions, status.ConditionReady, metav1.ConditionUnknown, ReasonWaiting, msg)
	status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonWaiting, msg)
	if n := w.notice; n != nil && news && !r.noticed.is(key(inst), job, msg) {
		// Once, when the wait starts (or changes), not on every
		// reconcile: after the status write that shows it. Not again
		// when Ready said something else meanwhile only because a
		// retried error interrupted the same wait.
		s.patch.OnStored(func() {
			r.noticed.set(key(inst), job, msg)
			log.Info(n.logMsg, "reason", n.reason, "for", w.msg)
			r.Recorder.Eventf(inst, nil, "Warning", n.reason, string(phase), "%s", msg)
		})
	}
	return flow.Stop().RequeueAfter(delay)
}

// enter moves the job from phase to next; again says next runs in this
// reconcile.
func (r *Reconciler) enter(ctx context.Context, s *scope, phase, next lsv1alpha1.Phase) (flow.Result, bool, error) {
	inst, job := s.inst, s.inst.Status.JobID
	r.Rechecks.Forget(key(inst))
	logf.FromContext(ctx).V(1).Info("phase done", "next", next)
	inst.Status.Phase = next
	if readyIsWaiting(inst) && !next.IsFinal() {
		// The wait is over: Ready said what the phase waited for (a name
		// held by an object on its way out, successors, orphans), and the
		// phase a status write shows next may say nothing of its own (one
		// entered in the next reconcile, say, or one that ends in an
		// error to retry), so the message would outlive the wait. It goes
		// with this transition's status write, which happens anyway (the
		// phase changed): no request more. A final phase sets Ready below.
		status.SetReady(&inst.Status.Conditions, inst.Generation, metav1.ConditionUnknown, ReasonProgressing,
			fmt.Sprintf("job %s is running: the wait in phase %s is over", job, phase))
	}
	if next == lsv1alpha1.PhaseSucceeded {
		r.jobSucceeded(s)
		return flow.Stop(), false, nil
	}
	if chains(s, next) {
		return flow.Continue(), true, nil
	}
	// The status write triggers the next reconcile, which runs the phase.
	return flow.Stop(), false, nil
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

// parseBlueprint reads the installation's inline blueprint.
func parseBlueprint(inst *lsv1alpha1.Installation) (*blueprint.Blueprint, error) {
	if inst.Spec.Blueprint.Inline == nil {
		return nil, flow.Stalledf(ReasonBlueprintInvalid, "spec.blueprint.inline is missing: only inline blueprints are supported")
	}
	bp, err := blueprint.Parse(inst.Spec.Blueprint.Inline.Filesystem)
	if err != nil {
		return nil, flow.StalledError(ReasonBlueprintInvalid, fmt.Errorf("blueprint: %w", err))
	}
	return bp, nil
}
