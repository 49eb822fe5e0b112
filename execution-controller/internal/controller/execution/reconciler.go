// Package execution reconciles Executions: it expands spec.deployItems into
// DeployItems (deterministic names, owner reference, labels), hands the
// execution's job to each item once everything it dependsOn has succeeded,
// gathers the items' exports into one DataObject, and runs the deletion flow
// (items deleted in reverse dependency order).
//
// The controller never calls a deployer: it writes an item's spec, its
// reconcile-time annotation and status.jobID, and reads the phase and
// jobIDFinished the deployer writes back. Every write names only the fields
// this controller owns (server-side apply, or merge patches of single keys).
package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "execution"

// Least privilege for this reconciler (collected into the binary's ClusterRole by make generate-rbac).
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=installations,verbs=get
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=executions/finalizers,verbs=update
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=dataobjects,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

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
	// superseded remembers, per execution, the resourceVersions this
	// controller's last writes replaced. A reconcile (e.g. woken by an item)
	// that finds one of them in the cache works from a copy older than the
	// controller's own write: it is skipped, as its writes could only
	// conflict; the watch event of that write brings the next reconcile.
	superseded stale.Versions
	// handedOver remembers, per deploy item, the resourceVersions the
	// writes of its hand-over replaced, until the cache shows the hand-over
	// (then it is forgotten): a reconcile that still sees an older copy does
	// not hand the job over a second time.
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

// namesakeWaiters maps an object (a deploy item, or a DataObject) to the
// executions that write an object of its name, other than its controller (Owns
// maps an item to it; an execution's own exports DataObject changes by its own
// writes, which need not wake it): found through index, ItemNameIndex
// (the items their spec maps to) or ExportsNameIndex (their exports). One of
// them may wait for it to go (DeployItemNameTaken, DataObjectNameTaken), and
// its deletion, or an item's failed deletion, must wake that execution. The
// owner reference reaches only the object's own controller (say execution
// "app-db" for "app-db-main", where "app" waits for its item "db-main"; an
// installation for a DataObject it exports), or nothing when the controller
// is no Execution. Read from the cache's index: an event of an object that
// holds no one else's name maps to nothing, and costs no request.
func (r *Reconciler) namesakeWaiters(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &lsv1alpha1.ExecutionList{}
		// Only names and UIDs are read: no copy of the cached objects needed.
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{index: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			logf.FromContext(ctx).Error(err, "listing executions by the name of an object they write",
				"index", index, "name", o.GetName())
			return nil
		}
		ref := metav1.GetControllerOf(o)
		var out []reconcile.Request
		for i := range list.Items {
			e := &list.Items[i]
			if ref != nil && ref.UID == e.UID {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e)})
		}
		return out
	}
}

// scope is the state of one reconcile.
type scope struct {
	exec   *lsv1alpha1.Execution
	before lsv1alpha1.ExecutionStatus
	// items are the deploy items the execution controls, by item name.
	items map[string]*lsv1alpha1.DeployItem
	// stamped names the items this reconcile created with the
	// reconcile-time stamp in their create.
	stamped []string
	// gone is set when the execution's finalizer was removed: no status write.
	gone bool
	// guardStatus makes the status write conditional on the execution's
	// resourceVersion (used when starting or ending a job, so a reconcile
	// working from a stale cache can neither start a second job nor end one
	// twice).
	guardStatus bool
	// afterStatus runs after a successful status write (e.g. removing the
	// operation annotation that caused it, so it is never lost).
	afterStatus []func(context.Context) error
	// done stops the phase list.
	done bool
	// root: the execution runs jobs of its own and is status.jobID's writer
	// (no installation owns it, or it is being deleted and its owner will
	// never hand it a deletion job; see ownsDeletion).
	root bool
}

type phaseFunc func(context.Context, *scope) (ctrl.Result, error)

// Reconcile runs the phases and writes the execution's status once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	exec := &lsv1alpha1.Execution{}
	if err := r.Client.Get(ctx, req.NamespacedName, exec); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.superseded.Stale(req.NamespacedName, exec.ResourceVersion) {
		logf.FromContext(ctx).V(1).Info("cached execution older than the controller's last write; waiting for its event",
			"resourceVersion", exec.ResourceVersion)
		return ctrl.Result{}, nil
	}
	cachedVersion := exec.ResourceVersion
	// One job is one trace: continue the trace of whoever handed the job over
	// (the annotation is absent when tracing is off), or start a new one when
	// this reconcile starts a root execution's own job or runs outside any job.
	traced, job := traceTarget(exec)
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, traced, job)
	s := &scope{exec: exec, before: *exec.Status.DeepCopy(), root: isRoot(exec)}
	defer func() { tracing.EndReconcile(span, string(s.exec.Status.Phase), retErr) }()
	if !s.root && exec.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(exec, lsv1alpha1.Finalizer) {
		own, err := r.ownsDeletion(ctx, exec)
		if err != nil {
			return ctrl.Result{}, err
		}
		s.root = own
	}
	log := logf.FromContext(ctx).WithValues("jobID", exec.Status.JobID, "phase", exec.Status.Phase)
	ctx = logf.IntoContext(ctx, log)

	defer func() {
		if exec.ResourceVersion != cachedVersion && !s.gone {
			// A write of this reconcile (finalizer, annotations) replaced it.
			r.superseded.Replaced(req.NamespacedName, cachedVersion)
		}
		if err := r.patchStatus(ctx, s); err != nil {
			if apierrors.IsConflict(err) {
				// We acted on a stale copy; the newer version's watch event
				// (not yet seen by the cache) triggers the next reconcile.
				log.V(1).Info("execution changed during reconcile", "error", err.Error())
				return
			}
			retErr = errors.Join(retErr, err)
			return
		}
		if s.gone {
			r.forget(req.NamespacedName)
			return
		}
		r.metrics.Phase(exec.Namespace, exec.Name, string(exec.Status.Phase))
	}()
	return r.doReconcile(ctx, s)
}

// forget drops what the controller keeps about an execution that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key.Namespace, key.Name)
	r.clock.Forget(key)
	r.superseded.Forget(key)
	r.deletionJobs.forget(key)
	r.unknownOps.Forget(key)
	r.foreignLabels.forget(key)
}

func (r *Reconciler) doReconcile(ctx context.Context, s *scope) (ctrl.Result, error) {
	r.checkOperation(ctx, s)
	phases := []phaseFunc{
		r.loadItems,
		r.ensureFinalizer,
		r.handleInterrupt,
		r.handleDeletion,
		r.handleReconcileOperation,
		r.startJob,
		r.runJob,
	}
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if err != nil || !res.IsZero() || s.done {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// patchStatus writes the fields of the execution's status this controller
// owns with server-side apply, and only when they changed. status.jobID is
// included only for executions without an owning installation: for the
// others the installation controller is its only writer.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if s.gone {
		return nil
	}
	now, before := s.exec.Status, s.before
	if !s.root {
		now.JobID, before.JobID = "", ""
	}
	if !equality.Semantic.DeepEqual(now, before) {
		body, err := toMap(now)
		if err != nil {
			return err
		}
		meta := map[string]any{"name": s.exec.Name, "namespace": s.exec.Namespace}
		if s.guardStatus {
			meta["resourceVersion"] = s.exec.ResourceVersion
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
			"kind":       "Execution",
			"metadata":   meta,
			"status":     body,
		}}
		if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("writing execution status: %w", err)
		}
		// A write that changed nothing on the server keeps the
		// resourceVersion: nothing was replaced then.
		if rv := u.GetResourceVersion(); rv != "" && rv != s.exec.ResourceVersion {
			r.superseded.Replaced(client.ObjectKeyFromObject(s.exec), s.exec.ResourceVersion)
			s.exec.ResourceVersion = rv
		}
	}
	for _, f := range s.afterStatus {
		rv := s.exec.ResourceVersion
		if err := f(ctx); err != nil {
			return err
		}
		if s.exec.ResourceVersion != rv {
			r.superseded.Replaced(client.ObjectKeyFromObject(s.exec), rv)
		}
	}
	return nil
}

// toMap converts a typed value into the generic form server-side apply
// sends, dropping empty fields (every field used here is omitempty).
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
