package installation

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/components"
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

// AddToManager registers the Installation reconciler with mgr.
func AddToManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	resolver, err := components.NewResolver(opts.Components, nil)
	if err != nil {
		return err
	}
	r := &Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder(FieldManager),
		Rechecks:   opts.Rechecks,
		Bounds:     opts,
		Components: resolver,
	}
	return r.SetupWithManager(ctx, mgr, opts.Controller)
}

// Least privilege for this reconciler (collected into the binary's ClusterRole
// by make generate-rbac). Secrets and ConfigMaps are only read with get, one
// import at a time, so the controller never needs to list or watch them; the
// only Secret it writes is an installation's template state (template_state.go).
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations/finalizers,verbs=update
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=dataobjects,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=targets,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=contexts,verbs=list;watch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=componentversionoverwrites,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

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
	// Bounds are what one installation may make the controller create,
	// read and render (options.go); zero values mean the defaults, and the
	// process-wide template budget is set from them.
	Bounds Options
	// Components reads component versions and their blueprints; one per
	// process, so that every installation shares its cache. Nil: a
	// resolver with the default options.
	Components *components.Resolver
	// ProcessID tells this process's render marks (render_mark.go) from
	// those of an earlier process; empty: a new random ID.
	ProcessID string
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
	// rendered remembers the job phases this process rendered once
	// (render_mark.go).
	rendered renderedJobs
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
	r.Bounds = r.Bounds.withDefaults()
	if err := r.Bounds.apply(); err != nil {
		return err
	}
	if r.ProcessID == "" {
		r.ProcessID = jobid.New()
	}
	if r.Components == nil {
		resolver, err := components.NewResolver(components.Options{}, nil)
		if err != nil {
			return err
		}
		r.Components = resolver
	}
	// Events quote errors: their notes are bounded as the API server requires.
	r.Recorder = status.BoundedRecorder(r.Recorder)
	r.metrics = metrics.For(Kind)
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ImportsIndex, indexImports); err != nil {
		return fmt.Errorf("indexing installations by imports: %w", err)
	}
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ExportsIndex, indexExports); err != nil {
		return fmt.Errorf("indexing installations by exports: %w", err)
	}
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, TreeIndex, indexTree); err != nil {
		return fmt.Errorf("indexing installations by tree: %w", err)
	}
	if err := idx.IndexField(ctx, &lsv1alpha1.Installation{}, ParentIndex, indexParent); err != nil {
		return fmt.Errorf("indexing installations by parent: %w", err)
	}
	for _, obj := range []client.Object{&lsv1alpha1.DataObject{}, &lsv1alpha1.Target{}} {
		if err := idx.IndexField(ctx, obj, WriterIndex, indexWriter); err != nil {
			return fmt.Errorf("indexing %T by writer: %w", obj, err)
		}
	}
	// Contexts and ComponentVersionOverwrites are read through the cache but
	// watched by nothing (a change applies from the next job on): start
	// their informers with the manager, so the first job that reads one
	// does not wait for it to start and sync.
	for _, obj := range []client.Object{&lsv1alpha1.Context{}, &lsv1alpha1.ComponentVersionOverwrites{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting the %T informer: %w", obj, err)
		}
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
	// secrets are the values of the imports read from Secrets this
	// reconcile: no message it writes quotes them.
	secrets secretValues
	// component is the installation's component version as this
	// reconcile's phase read it (nil without spec.componentDescriptor).
	component *componentVersion
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
	// One deadline for every render and data mapping of this reconcile.
	ctx = withRenderDeadline(ctx, time.Now().Add(r.Bounds.RenderTimeout))
	patch, err := status.NewPatcher(r.Client, inst, status.FieldOwner(FieldManager), status.RecordWrites(&r.ownWrites))
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{inst: inst, patch: patch}
	defer func() { res, retErr = r.finish(ctx, s, res, retErr) }()
	out, err := flow.Run(ctx, s,
		r.ensureFinalizer,
		r.handleInterrupt,
		r.startAutomatically,
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
	r.rendered.forget(key)
	if r.Rechecks != nil {
		r.Rechecks.Forget(key)
	}
}

func key(inst *lsv1alpha1.Installation) types.NamespacedName {
	return types.NamespacedName{Namespace: inst.Namespace, Name: inst.Name}
}
