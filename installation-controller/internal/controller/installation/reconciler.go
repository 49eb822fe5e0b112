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
	"k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
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
// terrace_jobs_started_total cover it). A fatal error emits its lastError reason (e.g. TemplateFailed,
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

// lastError reasons of fatal errors.
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
	// replaced remembers the resourceVersions of each installation that this
	// controller's writes replaced (kit/stale): a reconcile that reads one of
	// them from the cache is skipped (the watch event of the write, which has
	// not arrived yet, triggers the next one), so a lagging cache never
	// re-runs phases already written.
	replaced stale.Versions
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
	inst   *lsv1alpha1.Installation
	before *lsv1alpha1.Installation
	// lock makes the status write conditional on the resourceVersion read
	// (used when a job starts, so a stale cache can never start two).
	lock bool
	// gone is set when the finalizer was removed: no status write.
	gone bool
	// skipWrite is set when an earlier status write of this reconcile
	// failed: the installation moved on, nothing more is written.
	skipWrite bool
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
	// written runs once the status this reconcile computed is stored (the
	// write succeeded or was not needed): events and metrics of the
	// transitions it holds, so a write that conflicts reports nothing.
	written []func()
	// afterStatus runs after a successful status write, e.g. removing the
	// annotation that started the job, so that it is never lost.
	afterStatus []func(context.Context) error
	// beforeStatus runs right before the status write (the guarded metadata
	// patch that consumes a root's reconcile annotation); when it fails,
	// nothing more is written by this reconcile.
	beforeStatus func(context.Context) error
	// interrupted is set when an interrupt annotation reached a job in
	// Init: phaseInit ends the job Failed (Interrupted).
	interrupted bool
	// replaced collects the resourceVersions of the installation that this
	// reconcile's writes replaced (writeInst), oldest first.
	replaced []string
}

// writeInst runs write, a write of the installation that updates s.inst from
// its response, and records the resourceVersion it replaced (a write that
// changed nothing keeps the version: nothing replaced).
func (s *scope) writeInst(write func() error) error {
	before := s.inst.ResourceVersion
	err := write()
	if s.inst.ResourceVersion != before {
		s.replaced = append(s.replaced, before)
	}
	return err
}

// onWritten queues f until the status of this reconcile is stored.
func (s *scope) onWritten(f func()) { s.written = append(s.written, f) }

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

type phaseFunc func(context.Context, *scope) (ctrl.Result, bool, error)

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
	if r.replaced.Stale(req.NamespacedName, inst.ResourceVersion) {
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
	s := &scope{inst: inst, before: inst.DeepCopy()}
	defer func() { tracing.EndReconcile(span, string(s.inst.Status.Phase), retErr) }()
	log := logf.FromContext(ctx).WithValues("jobID", inst.Status.JobID, "phase", inst.Status.Phase)
	ctx = logf.IntoContext(ctx, log)
	defer func() {
		err := r.patchStatus(ctx, s)
		// What this reconcile's writes replaced, whether or not the last
		// one succeeded.
		r.replaced.Replaced(req.NamespacedName, s.replaced...)
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// The installation moved on; its new version triggers us again.
				log.V(1).Info("installation changed during reconcile", "error", err.Error())
				res, retErr = ctrl.Result{RequeueAfter: time.Second}, nil
				return
			}
			retErr = errors.Join(retErr, err)
			return
		}
		if s.gone {
			r.forget(req.NamespacedName)
			return
		}
		r.metrics.Phase(inst.Namespace, inst.Name, string(inst.Status.Phase))
	}()
	return r.doReconcile(ctx, s)
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
	r.replaced.Forget(key)
	r.gone.forget(key)
	r.waits.set(key, nil)
	r.noticed.forget(key)
	if r.Rechecks != nil {
		r.Rechecks.Forget(key)
	}
}

func (r *Reconciler) doReconcile(ctx context.Context, s *scope) (ctrl.Result, error) {
	steps := []phaseFunc{
		r.ensureFinalizer,
		r.handleInterrupt,
		r.startJob,
		r.runPhase,
	}
	for _, step := range steps {
		res, stop, err := step(ctx, s)
		if err != nil || stop || !res.IsZero() {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it changed (merge patch of the
// difference, so fields this reconcile did not touch are never written).
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if s.gone || s.skipWrite {
		return nil
	}
	if f := s.beforeStatus; f != nil {
		s.beforeStatus = nil
		if err := f(ctx); err != nil {
			s.skipWrite = true
			return err
		}
	}
	if !equality.Semantic.DeepEqual(s.inst.Status, s.before.Status) {
		// The base gets the metadata as this reconcile last wrote it
		// (finalizer, annotations): the patch then holds only status, and the
		// optimistic lock checks the latest resourceVersion we know.
		base := s.before.DeepCopy()
		base.ObjectMeta = *s.inst.ObjectMeta.DeepCopy()
		var opts []client.MergeFromOption
		if s.lock {
			opts = append(opts, client.MergeFromWithOptimisticLock{})
		}
		err := s.writeInst(func() error {
			return r.Client.Status().Patch(ctx, s.inst, client.MergeFromWithOptions(base, opts...), client.FieldOwner(FieldManager))
		})
		if err != nil {
			return fmt.Errorf("writing installation status: %w", err)
		}
	}
	for _, f := range s.written {
		f()
	}
	for _, f := range s.afterStatus {
		if err := f(ctx); err != nil {
			return err
		}
	}
	return nil
}

// flushStatus writes the status computed so far in the middle of a
// reconcile (a job's start, guarded) and makes it the new base; after a
// failure nothing more is written by this reconcile.
func (r *Reconciler) flushStatus(ctx context.Context, s *scope) error {
	err := r.patchStatus(ctx, s)
	s.written, s.afterStatus = nil, nil
	if err != nil {
		s.skipWrite = true
		return err
	}
	s.lock = false
	s.before = s.inst.DeepCopy()
	return nil
}

// startsNewJobNow reports whether this reconcile starts a new job that
// consumes the reconcile annotation: the finalizer then goes into the same
// metadata patch as the annotation's removal.
func startsNewJobNow(inst *lsv1alpha1.Installation) bool {
	d := jobs.Decide(jobState(inst))
	return d.Action == jobs.StartNewJob && d.RemoveOperation
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.inst.DeletionTimestamp != nil || controllerutil.ContainsFinalizer(s.inst, lsv1alpha1.Finalizer) {
		return ctrl.Result{}, false, nil
	}
	if startsNewJobNow(s.inst) {
		// Added together with the annotation's removal, in the metadata
		// patch right before the new job's first status write (startJob).
		return ctrl.Result{}, false, nil
	}
	if err := s.writeInst(func() error {
		return patchMeta(ctx, r.Client, s.inst, nil, []string{lsv1alpha1.Finalizer})
	}); err != nil {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{}, false, nil
}

// handleInterrupt moves an interrupt annotation from the installation to its
// sub-installations and execution; the execution controller fails the
// unfinished deploy items, so the whole tree finishes as usual.
func (r *Reconciler) handleInterrupt(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if lsv1alpha1.Operation(s.inst.Annotations[lsv1alpha1.OperationAnnotation]) != lsv1alpha1.OperationInterrupt {
		return ctrl.Result{}, false, nil
	}
	subs, exec, err := r.subObjects(ctx, s.inst)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	op := string(lsv1alpha1.OperationInterrupt)
	for _, sub := range subs {
		if err := patchAnnotations(ctx, r.Client, sub, map[string]*string{lsv1alpha1.OperationAnnotation: &op}); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	if exec != nil {
		if err := patchAnnotations(ctx, r.Client, exec, map[string]*string{lsv1alpha1.OperationAnnotation: &op}); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	removeAnnotation := func(ctx context.Context) error {
		return s.writeInst(func() error {
			return patchAnnotations(ctx, r.Client, s.inst, map[string]*string{lsv1alpha1.OperationAnnotation: nil})
		})
	}
	if inst := s.inst; inst.Status.Phase == lsv1alpha1.PhaseInit && inst.Status.JobID != inst.Status.JobIDFinished {
		// A job still in Init (e.g. waiting for its predecessors) has no
		// unfinished deploy items the interrupt could fail, so it would
		// never end; phaseInit ends it. The annotation goes only after
		// that status is written, so the interrupt is never lost.
		s.interrupted = true
		s.afterStatus = append(s.afterStatus, removeAnnotation)
	} else if err := removeAnnotation(ctx); err != nil {
		return ctrl.Result{}, true, err
	}
	r.Recorder.Eventf(s.inst, nil, "Normal", ReasonInterrupted, "Interrupt", "interrupt handed to %d sub-installation(s) and %d execution(s)", len(subs), btoi(exec != nil))
	return ctrl.Result{}, false, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startJob applies the start rules (package jobs) and starts a job when they say so.
func (r *Reconciler) startJob(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	inst := s.inst
	state := jobState(inst)
	if state.Deleting && !state.Root {
		// From the cache: see jobid.ParentGone.
		gone, err := jobid.ParentGone(ctx, r.Client, inst)
		if err != nil {
			return ctrl.Result{}, true, err
		}
		state.ParentGone = gone
	}
	d := jobs.Decide(state)
	starting := d.Action == jobs.StartNewJob || d.Action == jobs.StartHandedJob
	if starting && isRoot(inst) {
		// The reconcile span is the root of the job's trace: every later
		// reconcile of the job continues it from the annotation. Written
		// before anything else of the job, so no reconcile of the job can
		// miss it; a conflict means the cache was stale.
		if err := s.writeInst(func() error { return r.writeOwnTraceContext(ctx, inst) }); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				logf.FromContext(ctx).V(1).Info("installation changed before the job started", "error", err.Error())
				return ctrl.Result{RequeueAfter: time.Second}, true, nil
			}
			return ctrl.Result{}, true, fmt.Errorf("writing the trace context: %w", err)
		}
	}
	if d.RemoveOperation && d.Action != jobs.StartNewJob {
		if err := s.writeInst(func() error {
			return patchAnnotations(ctx, r.Client, inst, map[string]*string{lsv1alpha1.OperationAnnotation: nil})
		}); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	if d.IgnoredReconcile {
		r.Recorder.Eventf(inst, nil, "Normal", ReasonReconcileIgnored, "Reconcile", "the reconcile annotation only starts jobs on root installations; removed")
	}
	if d.Postponed && inst.Status.Phase != "" {
		logf.FromContext(ctx).V(1).Info("reconcile annotation postponed until the running job finishes")
	}
	resumed := false
	if d.Action == jobs.Idle && startLost(inst) {
		// The reconcile annotation was consumed for this job, but its start
		// never reached the status: resume it (same ID unless the spec
		// changed since, sub-objects found done as far as they got).
		d = jobs.Decision{Action: jobs.StartNewJob, Phase: lsv1alpha1.PhaseInit}
		resumed = true
		logf.FromContext(ctx).Info("resuming a job whose start was not written", "startedJobID", inst.Annotations[StartedJobAnnotation])
	}
	switch d.Action {
	case jobs.Idle:
		r.hintNewJobAfterFailure(s)
		return ctrl.Result{}, true, nil
	case jobs.Continue:
		return ctrl.Result{}, false, nil
	case jobs.StartNewJob:
		inst.Status.JobID = newJobID(inst)
	}
	// Guarded: the status write that records the start carries the
	// resourceVersion read, so a stale cache can never start a job twice.
	s.lock = true
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(inst.Status.JobID))
	inst.Status.Phase = d.Phase
	inst.Status.ObservedGeneration = inst.Generation
	inst.Status.LastError = nil
	// Ready turns Unknown now (removed first, so its transition time is the
	// job's start even if the previous job left it Unknown).
	apimeta.RemoveStatusCondition(&inst.Status.Conditions, lsv1alpha1.ConditionReady)
	r.setReady(inst, metav1.ConditionUnknown, ReasonProgressing, fmt.Sprintf("job %s started", inst.Status.JobID))
	r.Rechecks.Forget(key(inst))
	job, started := inst.Status.JobID, r.Now()
	s.onWritten(func() {
		r.clock.Start(key(inst), job, started)
		r.metrics.JobStarted()
	})
	if d.Phase == lsv1alpha1.PhaseInit {
		// An install job's start goes out with the status write of the
		// phases that run now (one write instead of two). Should that write
		// conflict or never happen after sub-objects were created or handed
		// the job, the next reconcile reads the same state, derives the same
		// job ID (newJobID) and finds that work done already.
		if (d.RemoveOperation || (resumed && inst.Annotations[StartedJobAnnotation] != inst.Status.JobID)) && isRoot(inst) {
			// A root's reconcile annotation is consumed in one guarded
			// metadata patch with the finalizer and the started-job record
			// that keeps the request from being lost (startLost). It goes
			// right before the status write, not before the phases: the
			// execution's create and hand-over do not wait for it, and a
			// reconcile repeated before it derives the same job. A resumed
			// start whose spec changed since it was consumed runs under a
			// new ID (newJobID): the record follows it, or the job would
			// count as lost again once it ended.
			job := inst.Status.JobID
			s.beforeStatus = func(ctx context.Context) error {
				return s.writeInst(func() error { return r.consumeAnnotation(ctx, s.inst, job) })
			}
		}
		return ctrl.Result{}, false, nil
	}
	// A deletion job's start is written now, guarded, before anything is
	// deleted (it shows InitDelete first); a reconcile annotation that
	// restarts a failed deletion is consumed only after that write, so the
	// request is never lost.
	if err := r.flushStatus(ctx, s); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			logf.FromContext(ctx).V(1).Info("installation changed before the job started", "error", err.Error())
			return ctrl.Result{RequeueAfter: time.Second}, true, nil
		}
		return ctrl.Result{}, true, err
	}
	if d.RemoveOperation {
		if err := s.writeInst(func() error { return r.consumeAnnotation(ctx, inst, "") }); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	// The phases run in this reconcile.
	return ctrl.Result{}, false, nil
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
	status := inst.Status.DeepCopy()
	err := r.Client.Patch(ctx, inst, mergePatch{"metadata": meta}, client.FieldOwner(FieldManager))
	// The status stays as this reconcile computed it (the response holds the
	// same, written just before).
	inst.Status = *status
	if err != nil {
		return fmt.Errorf("removing the reconcile annotation of %s: %w", inst.Name, err)
	}
	return nil
}

func key(inst *lsv1alpha1.Installation) types.NamespacedName {
	return types.NamespacedName{Namespace: inst.Namespace, Name: inst.Name}
}

// outcome is what a phase function decides.
type outcome struct {
	// next is the phase to move to; "" stays (wait).
	next lsv1alpha1.Phase
	// waitMsg says what the phase waits for (with next == "").
	waitMsg string
	// notice, with waitMsg, says a wait that may last (on someone else's
	// object) once, when it starts (a Warning event and an info line); nil
	// for the waits of a job's course (predecessors, sub-objects), which
	// the Ready condition alone shows.
	notice *waitNotice
	// waitOn, with waitMsg, is the DataObject or Target whose events end
	// the wait (nameWaits); nil when other watches cover it.
	waitOn *waitedObject
	// gone: the installation's finalizer was removed.
	gone bool
}

// fatalError ends the job (Failed or DeleteFailed).
type fatalError struct {
	reason string
	code   lsv1alpha1.ErrorCode
	err    error
}

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(reason string, code lsv1alpha1.ErrorCode, err error) error {
	return &fatalError{reason: reason, code: code, err: err}
}

func fatalf(reason string, code lsv1alpha1.ErrorCode, format string, args ...any) error {
	return fatal(reason, code, fmt.Errorf(format, args...))
}

func (r *Reconciler) phaseFunc(p lsv1alpha1.Phase) func(context.Context, *scope) (outcome, error) {
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

// runPhase runs the current phase of the running job once, in a span of its
// own ("Installation.<Phase>"): the job is handed to sub-objects from there.
func (r *Reconciler) runPhase(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	for {
		res, stop, again, err := r.runOnePhase(ctx, s)
		if !again {
			return res, stop, err
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

// runOnePhase runs the current phase; again says the next phase runs in
// the same reconcile.
func (r *Reconciler) runOnePhase(ctx context.Context, s *scope) (ctrl.Result, bool, bool, error) {
	inst := s.inst
	log := logf.FromContext(ctx)
	phase := inst.Status.Phase
	fn := r.phaseFunc(phase)
	if fn == nil {
		return ctrl.Result{}, true, false, nil
	}
	pctx, span := tracing.StartStep(ctx, tracer(), Kind, string(phase), tracing.AttrPhase.String(string(phase)))
	out, err := fn(pctx, s)
	var w *waiting
	if errors.As(err, &w) {
		// A wait met deep inside the phase: the phase waits (see waiting).
		out, err = w.out, nil
	}
	// Recorded anew on every run of a phase, so the record goes with the
	// wait.
	r.waits.set(key(inst), out.waitOn)
	if out.waitMsg != "" {
		span.SetAttributes(AttrWaitingFor.String(out.waitMsg))
	}
	tracing.EndStep(span, err)
	deleteFlow := jobs.IsDeletePhase(phase)
	job := inst.Status.JobID
	var fe *fatalError
	switch {
	case errors.As(err, &fe):
		failed, transition := lsv1alpha1.PhaseFailed, ReasonFailed
		if deleteFlow {
			failed, transition = lsv1alpha1.PhaseDeleteFailed, ReasonJobDeleteFailed
		}
		log.Info("job failed", "reason", fe.reason, "error", fe.err.Error())
		took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
		r.setLastError(inst, string(phase), fe.reason, fe.err.Error(), fe.code)
		inst.Status.Phase = failed
		inst.Status.JobIDFinished = job
		r.setReady(inst, metav1.ConditionFalse, fe.reason, fe.err.Error())
		msg := fe.err.Error()
		s.onWritten(func() {
			r.metrics.JobFinished(string(failed), took)
			r.Recorder.Eventf(inst, nil, "Warning", fe.reason, string(phase), "%s", msg)
			r.Recorder.Eventf(inst, nil, "Warning", transition, "Reconcile", "job %s ended %s in phase %s: %s", job, failed, phase, fe.reason)
		})
		r.Rechecks.Forget(key(inst))
		return ctrl.Result{}, true, false, nil
	case err != nil:
		// A normal error repeats the phase; the controller's rate limiter
		// makes the intervals grow. The event says so once per distinct error.
		if readyIsWaiting(inst) {
			// The phase did not get to say whether it still waits: Ready
			// must not show the wait as current next to the error. Should
			// the retry wait again, its notice is not repeated (noticed).
			r.setReady(inst, metav1.ConditionUnknown, ReasonProgressing,
				fmt.Sprintf("job %s is running: phase %s meets an error and is retried (see lastError)", job, phase))
		}
		if r.setLastError(inst, string(phase), ReasonTransient, err.Error(), "") {
			msg := err.Error()
			s.onWritten(func() {
				r.Recorder.Eventf(inst, nil, "Warning", ReasonRetrying, string(phase), "phase %s will be retried: %s", phase, msg)
			})
		}
		return ctrl.Result{}, true, false, err
	case out.gone:
		s.gone = true
		took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
		r.metrics.JobFinished(ReasonDeleted, took)
		r.Recorder.Eventf(inst, nil, "Normal", ReasonDeleted, "Delete", "job %s deleted every sub-object; finalizer removed", job)
		return ctrl.Result{}, true, false, nil
	case out.next == "" && r.wentMeanwhile(ctx, inst.Namespace, out.waitOn):
		// The object went between the phase's read and the record of the
		// wait, whose wake-up it may have missed: the phase runs again at
		// once instead of waiting for a re-check.
		log.V(1).Info("what the phase would wait for is gone already; running it again", "for", out.waitMsg)
		return ctrl.Result{RequeueAfter: time.Millisecond}, true, false, nil
	case out.next == "":
		delay := r.Rechecks.When(key(inst))
		log.V(1).Info("waiting", "for", out.waitMsg, "recheckAfter", delay)
		// Say what the job waits for (written only when it changes), so a
		// stall is never silent.
		msg := fmt.Sprintf("phase %s waits for %s", phase, out.waitMsg)
		news := !readyIs(inst, metav1.ConditionUnknown, ReasonWaiting, msg)
		r.setReady(inst, metav1.ConditionUnknown, ReasonWaiting, msg)
		if n := out.notice; n != nil && news && !r.noticed.is(key(inst), job, msg) {
			// Once, when the wait starts (or changes), not on every
			// reconcile: after the status write that shows it. Not again
			// when Ready said something else meanwhile only because a
			// retried error interrupted the same wait.
			s.onWritten(func() {
				r.noticed.set(key(inst), job, msg)
				log.Info(n.logMsg, "reason", n.reason, "for", out.waitMsg)
				r.Recorder.Eventf(inst, nil, "Warning", n.reason, string(phase), "%s", msg)
			})
		}
		return ctrl.Result{RequeueAfter: delay}, true, false, nil
	}
	r.Rechecks.Forget(key(inst))
	log.V(1).Info("phase done", "next", out.next)
	inst.Status.Phase = out.next
	if readyIsWaiting(inst) && !out.next.IsFinal() {
		// The wait is over: Ready said what the phase waited for (a name
		// held by an object on its way out, successors, orphans), and the
		// phase a status write shows next may say nothing of its own (one
		// entered in the next reconcile, say, or one that ends in an
		// error to retry), so the message would outlive the wait. It goes
		// with this transition's status write, which happens anyway (the
		// phase changed): no request more. A final phase sets Ready below.
		r.setReady(inst, metav1.ConditionUnknown, ReasonProgressing,
			fmt.Sprintf("job %s is running: the wait in phase %s is over", job, phase))
	}
	if out.next == lsv1alpha1.PhaseSucceeded {
		took := r.clock.Finish(key(inst), job, jobStartTime(inst), r.Now())
		inst.Status.JobIDFinished = job
		inst.Status.LastError = nil
		r.setReady(inst, metav1.ConditionTrue, ReasonSucceeded, fmt.Sprintf("job %s succeeded", job))
		s.onWritten(func() {
			r.metrics.JobFinished(string(lsv1alpha1.PhaseSucceeded), took)
			r.Recorder.Eventf(inst, nil, "Normal", ReasonSucceeded, "Reconcile", "job %s succeeded", job)
		})
		return ctrl.Result{}, true, false, nil
	}
	if chains(s, out.next) {
		return ctrl.Result{}, false, true, nil
	}
	// The status write triggers the next reconcile, which runs the phase.
	return ctrl.Result{}, true, false, nil
}

func (r *Reconciler) setReady(inst *lsv1alpha1.Installation, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{
		Type:               lsv1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            readyMessage(msg),
		ObservedGeneration: inst.Generation,
	})
}

// readyIsWaiting reports whether the Ready condition says that a phase
// waits (reason Waiting).
func readyIsWaiting(inst *lsv1alpha1.Installation) bool {
	c := apimeta.FindStatusCondition(inst.Status.Conditions, lsv1alpha1.ConditionReady)
	return c != nil && c.Reason == ReasonWaiting
}

// readyIs reports whether the Ready condition is what setReady would write.
func readyIs(inst *lsv1alpha1.Installation, status metav1.ConditionStatus, reason, msg string) bool {
	c := apimeta.FindStatusCondition(inst.Status.Conditions, lsv1alpha1.ConditionReady)
	return c != nil && c.Status == status && c.Reason == reason && c.Message == readyMessage(msg)
}

// readyMessage cuts a message to the length the Ready condition keeps.
func readyMessage(msg string) string {
	if len(msg) > 32768 {
		return msg[:32768]
	}
	return msg
}

// setLastError records lastError and reports whether it changed.
func (r *Reconciler) setLastError(inst *lsv1alpha1.Installation, op, reason, msg string, code lsv1alpha1.ErrorCode) bool {
	now := metav1.NewTime(r.Now())
	e := &lsv1alpha1.Error{Operation: op, Reason: reason, Message: msg, LastTransitionTime: now, LastUpdateTime: now}
	if code != "" {
		e.Codes = []lsv1alpha1.ErrorCode{code}
	}
	if prev := inst.Status.LastError; prev != nil && prev.Reason == reason && prev.Message == msg && prev.Operation == op {
		// The same error again: keep the object unchanged (no write that
		// changes nothing but a timestamp on every retry).
		return false
	}
	inst.Status.LastError = e
	return true
}

// parseBlueprint reads the installation's inline blueprint.
func parseBlueprint(inst *lsv1alpha1.Installation) (*blueprint.Blueprint, error) {
	if inst.Spec.Blueprint.Inline == nil {
		return nil, fatalf(ReasonBlueprintInvalid, lsv1alpha1.ErrorConfigurationProblem, "spec.blueprint.inline is missing: only inline blueprints are supported")
	}
	bp, err := blueprint.Parse(inst.Spec.Blueprint.Inline.Filesystem)
	if err != nil {
		return nil, fatal(ReasonBlueprintInvalid, lsv1alpha1.ErrorConfigurationProblem, fmt.Errorf("blueprint: %w", err))
	}
	return bp, nil
}
