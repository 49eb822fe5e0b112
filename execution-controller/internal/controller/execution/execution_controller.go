package execution

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/notes"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// Least privilege for this reconciler (collected into the binary's ClusterRole by make generate-rbac).
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations,verbs=get
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/finalizers,verbs=update
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=dataobjects,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=targets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "execution"

// Reconciler reconciles Executions.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly: items in the deletion
	// flow, export Secrets (not worth caching every Secret of the
	// cluster), and the owning installation of a deleted execution while no
	// job runs (ownsDeletion). The hand-over needs no live read: its write
	// is guarded by the resourceVersion.
	APIReader client.Reader
	// Recorder emits events on executions.
	Recorder events.EventRecorder
	// FieldManager is the field manager of every write.
	FieldManager string
	// OwnerRecheck is how often a deleted execution waiting for its
	// installation's deletion job re-reads it; zero: DefaultOwnerRecheck.
	OwnerRecheck time.Duration
	// NameRecheck is how often a job waiting for a namesake deploy item or
	// exports DataObject to go (DeployItemNameTaken, DataObjectNameTaken) is
	// reconciled without an event; zero: DefaultNameRecheck. A safety net
	// only: the namesake's events wake the execution.
	NameRecheck time.Duration
	// Now returns the current time; tests may replace it.
	Now func() time.Time

	// metrics records the shared job and phase metrics (kind Execution).
	metrics metrics.Recorder
	// clock times jobs for terrace_job_duration_seconds.
	clock metrics.JobClock
	// ownWrites remembers, per execution, the resourceVersions this
	// controller's own writes replaced. A reconcile (e.g. woken by an item)
	// that finds one of them in the cache works from a copy older than the
	// controller's own write: it is skipped, as its writes could only
	// conflict; the watch event of that write brings the next reconcile.
	ownWrites stale.Versions
	// outcomes ends every reconcile the same way (kit/flow).
	outcomes flow.Outcomes
	// handedOver remembers, per deploy item, the resourceVersions the
	// writes of its hand-over replaced, until the cache shows the hand-over
	// (then it is forgotten): a reconcile that still sees an older copy does
	// not hand the job over a second time. (Another idea than ownWrites:
	// versions of the items, not of the execution.)
	handedOver stale.Versions
	// deletionJobs remembers, per deleted owned execution, whether its
	// running deletion job is its own (see ownsDeletion).
	deletionJobs deletionJobs
	// unknownOps remembers the unknown operation values already reported.
	unknownOps unknownop.Tracker
	// foreignLabels remembers, per execution's item, the labels found not
	// to be this controller's (see updateItem).
	foreignLabels foreignLabels
}

// SetupWithManager checks the reconciler's inputs, registers the field index
// on deploy items and the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := setup.Check("execution", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder), setup.Required("FieldManager", r.FieldManager)); err != nil {
		return err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	r.metrics = metrics.For(Kind)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &lsv1alpha1.DeployItem{}, OwnerIndex, indexOwner); err != nil {
		return fmt.Errorf("indexing deploy items by execution: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &lsv1alpha1.Execution{}, ItemNameIndex, indexItemNames); err != nil {
		return fmt.Errorf("indexing executions by deploy item name: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &lsv1alpha1.Execution{}, ExportsNameIndex, indexExportsName); err != nil {
		return fmt.Errorf("indexing executions by exports DataObject name: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(opts).
		// Status changes of the execution matter (a parent hands over a job
		// by writing status.jobID), so no generation filter.
		For(&lsv1alpha1.Execution{}).
		// Item status (phase, jobIDFinished, exportRef) drives the job.
		Owns(&lsv1alpha1.DeployItem{}).
		// A namesake a job waits for (DeployItemNameTaken) is not always
		// the waiting execution's own item: its events go to the execution
		// whose item name it holds, too.
		Watches(&lsv1alpha1.DeployItem{}, handler.EnqueueRequestsFromMapFunc(r.namesakeWaiters(ItemNameIndex))).
		// Likewise a DataObject of an exports name being deleted
		// (DataObjectNameTaken): no execution controls it, or not the one
		// waiting. The informer is the one the exports' cached read
		// (gatherExports) uses anyway: no further objects are cached.
		Watches(&lsv1alpha1.DataObject{}, handler.EnqueueRequestsFromMapFunc(r.namesakeWaiters(ExportsNameIndex))).
		Complete(r)
}

// scope is the state of one reconcile.
type scope struct {
	exec *lsv1alpha1.Execution
	// status writes the execution's status once, at the end of the
	// reconcile (server-side apply of the fields this controller owns;
	// status.jobID only while it is their writer, see root), and records
	// every write of the execution in ownWrites.
	status *status.Patcher
	// items are the deploy items the execution controls, by item name.
	items map[string]*lsv1alpha1.DeployItem
	// stamped names the items this reconcile created with the
	// reconcile-time stamp in their create.
	stamped []string
	// gone is set when the execution's finalizer was removed: no status write.
	gone bool
	// root: the execution runs jobs of its own and is status.jobID's writer
	// (no installation owns it, or it is being deleted and its owner will
	// never hand it a deletion job; see ownsDeletion).
	root bool
}

// Reconcile runs the steps of seed 002 on one execution and writes its
// status once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	exec := &lsv1alpha1.Execution{}
	if err := r.Client.Get(ctx, req.NamespacedName, exec); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.ownWrites.Stale(req.NamespacedName, exec.ResourceVersion) {
		logf.FromContext(ctx).V(1).Info("cached execution older than the controller's last write; waiting for its event",
			"resourceVersion", exec.ResourceVersion)
		return ctrl.Result{}, nil
	}
	// One job is one trace: continue the trace of whoever handed the job over
	// (the annotation is absent when tracing is off), or start a new one when
	// this reconcile starts a root execution's own job or runs outside any job.
	traced, job := traceTarget(exec)
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, traced, job)
	defer func() { tracing.EndReconcile(span, string(exec.Status.Phase), retErr) }()
	s, err := r.newScope(ctx, exec)
	if err != nil {
		return ctrl.Result{}, err
	}
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("jobID", exec.Status.JobID, "phase", exec.Status.Phase))

	res, err := flow.Run(ctx, s,
		r.checkOperation,
		r.loadItems,
		r.ensureFinalizer,
		r.handleInterrupt,
		r.handleDeletion,
		r.handleReconcileOperation,
		r.startJob,
		r.validateDependencies,
		r.runJob,
	)
	// The status is written whatever the steps ended with (a failed
	// Completing still says why in Ready); a step's own error wins over a
	// conflict of that write.
	if werr := r.writeStatus(ctx, s); werr != nil && (err == nil || !apierrors.IsConflict(werr)) {
		err = errors.Join(err, werr)
	}
	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, nil)
}

// newScope is the scope of a reconcile of exec, with its status snapshot.
func (r *Reconciler) newScope(ctx context.Context, exec *lsv1alpha1.Execution) (*scope, error) {
	s := &scope{exec: exec, root: isRoot(exec)}
	if !s.root && exec.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(exec, lsv1alpha1.Finalizer) {
		own, err := r.ownsDeletion(ctx, exec)
		if err != nil {
			return nil, err
		}
		s.root = own
	}
	opts := []status.Option{status.FieldOwner(r.FieldManager), status.RecordWrites(&r.ownWrites), status.Apply()}
	if !s.root {
		// The installation controller is status.jobID's only writer.
		opts = append(opts, status.Omit("jobID"))
	}
	p, err := status.NewPatcher(r.Client, exec, opts...)
	s.status = p
	return s, err
}

// writeStatus writes the execution's status, then what must follow it;
// an execution that is gone has none to write. What the controller keeps
// about it is forgotten once its deletion reaches the cache (Reconcile's
// NotFound): until then a reconcile of the cached, older object still finds
// the controller's last write (and waits) and its deletion job remembered
// (and reads no installation).
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	if s.gone {
		return nil
	}
	// Messages quote item names and other objects' messages: cut, so the
	// write is never refused for their size.
	notes.Conditions(s.exec.Status.Conditions)
	notes.LastError(s.exec.Status.LastError)
	if err := s.status.Patch(ctx, s.exec); err != nil {
		return err
	}
	r.metrics.Phase(s.exec.Namespace, s.exec.Name, string(s.exec.Status.Phase))
	return nil
}

// forget drops what the controller keeps about an execution that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key.Namespace, key.Name)
	r.clock.Forget(key)
	r.ownWrites.Forget(key)
	r.outcomes.Forget(key)
	r.deletionJobs.forget(key)
	r.unknownOps.Forget(key)
	r.foreignLabels.forget(key)
}
