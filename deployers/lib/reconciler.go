package lib

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// The deployer library reads and writes deploy items, reads Targets, and
// records Events. Deployers add their own markers.
//
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=get;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=targets;contexts,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

const (
	// targetIndex indexes cached items by "<namespace>/<spec.target.name>".
	targetIndex = "terrace.dev/target"
	// typeField is the CRD's selectable field the item informer filters on.
	typeField = "spec.type"

	minBackoff = time.Second
	maxBackoff = time.Minute
)

// Reconciler implements the deployer contract for one Deployer.
type Reconciler struct {
	opts     Options
	deployer Deployer
	hooks    extension.ReconcileExtensionHooks
	// items is the informer cache holding only items of opts.Type.
	items  cache.Cache
	client client.Client
	// reader reads from the API server, uncached: only on rare paths (the
	// installed-state record of a status write that conflicted, see
	// keepRecord; a Target or Context the cache does not hold yet, see
	// stale.Get), so the manager's cache never holds deploy items.
	reader   client.Reader
	recorder recorder.EventRecorder
	now      func() time.Time
	// metrics records the shared job and phase metrics (kind DeployItem).
	metrics metrics.Recorder
	// clock times jobs for terrace_job_duration_seconds.
	clock *metrics.JobClock
	// superseded remembers, per item, the resourceVersions this deployer's
	// last writes replaced. A reconcile that finds one of them in the cache
	// works from a copy older than the deployer's own write: it waits for the
	// cache instead of computing a write that could only conflict.
	superseded stale.Versions
	// unknownOps remembers the unknown operation values already reported.
	unknownOps unknownop.Tracker
}

// AddToManager builds a Reconciler for d and registers it with mgr.
func AddToManager(mgr ctrl.Manager, d Deployer, opts Options) error {
	r, err := New(mgr, d, opts)
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// New builds a Reconciler. It creates the type-filtered item cache and adds it
// to mgr; call SetupWithManager to start reconciling.
func New(mgr ctrl.Manager, d Deployer, opts Options) (*Reconciler, error) {
	if mgr == nil {
		return nil, errors.New("deployer: manager must not be nil")
	}
	if d == nil {
		return nil, errors.New("deployer: Deployer must not be nil")
	}
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	// A field selector on spec.type (a selectable field of the CRD) keeps other
	// deployers' items out of this process entirely: not cached, no events.
	var namespaces map[string]cache.Config
	if len(opts.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	items, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		HTTPClient:        mgr.GetHTTPClient(),
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{
			&lsv1alpha1.DeployItem{}: {Field: fields.OneTermEqualSelector(typeField, opts.Type)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("deployer %s: creating item cache: %w", opts.Name, err)
	}
	if err := items.IndexField(context.Background(), &lsv1alpha1.DeployItem{}, targetIndex, func(o client.Object) []string {
		di, ok := o.(*lsv1alpha1.DeployItem)
		if !ok || di.Spec.Target == nil {
			return nil
		}
		return []string{di.Namespace + "/" + di.Spec.Target.Name}
	}); err != nil {
		return nil, fmt.Errorf("deployer %s: indexing items by target: %w", opts.Name, err)
	}
	// Not ready before the item cache synced: on an API server that does
	// not serve the spec.type selectable field (Kubernetes < 1.31) it never
	// does, and the process must not look healthy and idle.
	if err := manager.AddCache(mgr, "deploy-item-cache-"+opts.Name, items); err != nil {
		return nil, fmt.Errorf("deployer %s: %w", opts.Name, err)
	}
	hooks := d.ExtensionHooks()
	if hooks == nil {
		hooks = extension.ReconcileExtensionHooks{}
	}
	return &Reconciler{
		opts:     opts,
		deployer: d,
		hooks:    hooks,
		items:    items,
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder(opts.Name),
		now:      time.Now,
		metrics:  metrics.For(Kind),
		clock:    &metrics.JobClock{},
	}, nil
}

// Options returns the effective options (defaults applied).
func (r *Reconciler) Options() Options { return r.opts }

// SetupWithManager registers the controller: deploy items of the deployer's
// type (from the filtered cache), and Targets (mapped to the items naming them,
// so an item waiting for its Target — or for a selector to match — moves).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r == nil || r.items == nil || r.deployer == nil || r.client == nil || r.reader == nil {
		return errors.New("deployer: reconciler not built by lib.New")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.Name).
		WithOptions(controller.Options{
			// Tests (and the benchmark) start several managers with the same
			// deployer in one process; the name only labels metrics and logs.
			SkipNameValidation: ptr.To(true),
		}).
		WatchesRawSource(source.Kind(r.items, &lsv1alpha1.DeployItem{},
			&handler.TypedEnqueueRequestForObject[*lsv1alpha1.DeployItem]{}, relevantChange())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &lsv1alpha1.Target{},
			handler.TypedEnqueueRequestsFromMapFunc(r.itemsForTarget))).
		Complete(r)
}

// relevantChange lets through the updates the contract reacts to and drops
// the rest, notably the deployer's own lastError/providerStatus writes, so a
// changing error message cannot turn into a hot loop. Phase changes pass:
// the Init write of a job start triggers the reconcile that does the work.
func relevantChange() predicate.TypedPredicate[*lsv1alpha1.DeployItem] {
	return predicate.TypedFuncs[*lsv1alpha1.DeployItem]{
		UpdateFunc: func(e event.TypedUpdateEvent[*lsv1alpha1.DeployItem]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.Generation != n.Generation ||
				!mapsEqual(o.Annotations, n.Annotations) ||
				!mapsEqual(o.Labels, n.Labels) ||
				// The deployer's own metadata patch after a job start: a
				// reconcile that read the item before it conflicts on its
				// status write and needs this event to go on.
				!slices.Equal(o.Finalizers, n.Finalizers) ||
				!ptr.Equal(o.DeletionTimestamp, n.DeletionTimestamp) ||
				o.Status.JobID != n.Status.JobID ||
				o.Status.JobIDFinished != n.Status.JobIDFinished ||
				o.Status.Phase != n.Status.Phase
		},
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (r *Reconciler) itemsForTarget(ctx context.Context, t *lsv1alpha1.Target) []reconcile.Request {
	var list lsv1alpha1.DeployItemList
	if err := r.items.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingFields{targetIndex: t.Namespace + "/" + t.Name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing deploy items for target", "target", client.ObjectKeyFromObject(t))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

type requestKey struct{}

// RequestFromContext returns the deploy item a reconcile is for. Hooks of type
// Start, which get no item, use it to tell reconciles apart.
func RequestFromContext(ctx context.Context) (reconcile.Request, bool) {
	req, ok := ctx.Value(requestKey{}).(reconcile.Request)
	return req, ok
}

// scope is the state of one reconcile.
type scope struct {
	log    logr.Logger
	orig   *lsv1alpha1.DeployItem
	item   *lsv1alpha1.DeployItem
	target *lsv1alpha1.Target
	// targetErr is a problem with the item's Target, reported when the job runs.
	targetErr error

	removeAnnotations []string
	// setAnnotations are written with the metadata patch (the trace context
	// of a job the deployer starts itself).
	setAnnotations  map[string]string
	addFinalizer    bool
	removeFinalizer bool
	// after runs once the reconcile's writes succeeded (or none was needed):
	// events and metrics of the transitions they hold, so a write that
	// conflicts reports nothing twice.
	after []func()
	// discard drops after: a write failed.
	discard bool
	// abandoned is set when an early write of the reconcile failed: nothing
	// more is written by it.
	abandoned bool
	// replaced are the resourceVersions the reconcile's early writes
	// replaced (recorded in superseded by patch).
	replaced []string
	// started: this reconcile started a job (and goes on to work on it);
	// what s.orig says about the previous job (phase, lastError) does not
	// apply to it.
	started bool

	// hookResult aggregates the results of every hook type run so far.
	hookResult *extension.HookResult
	// result is the deployer's requeue request.
	result reconcile.Result
}

// Reconcile runs the contract for one item. See the package documentation.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, retErr error) {
	log := logf.FromContext(ctx).WithValues("deployer", r.opts.Name, "type", r.opts.Type)
	ctx = context.WithValue(logf.IntoContext(ctx, log), requestKey{}, req)
	s := &scope{log: log}
	// Events and metrics go out last, once the writes they describe are done.
	defer func() {
		if !s.discard {
			for _, f := range s.after {
				f()
			}
		}
	}()

	// 1. Start hooks: no item, no target.
	if stop, err := r.runHooks(ctx, s, extension.StartHook); err != nil || stop {
		return s.finalResult(), err
	}

	item := &lsv1alpha1.DeployItem{}
	if err := r.items.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.superseded.Stale(req.NamespacedName, item.ResourceVersion) {
		// The cache has not caught up with this deployer's own last write
		// yet; its watch event (or this requeue, should the event be
		// filtered) brings the current copy.
		log.V(1).Info("cached deploy item older than the deployer's last write; waiting for the cache", "resourceVersion", item.ResourceVersion)
		return reconcile.Result{RequeueAfter: staleCacheRequeue}, nil
	}
	s.orig, s.item = item, item.DeepCopy()

	// Continue the trace of the job that handed the item over (the execution
	// controller writes its span context into the item), so one job is one
	// trace across binaries; a job the deployer starts itself is a trace of
	// its own, and so is a reconcile outside any job (a periodic re-apply, a
	// resync): else a long-lived item's trace would grow for ever. A no-op
	// while tracing is off.
	var traced client.Object = item
	job := item.Status.JobID
	switch {
	case decideStart(item).own:
		traced = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name}}
	case !inAJob(item):
		// Not part of the last job either: no job ID on its span.
		traced, job = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: item.Namespace, Name: item.Name}}, ""
	}
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, traced, job, AttrDeployer.String(r.opts.Name))
	defer func() { tracing.EndReconcile(span, string(s.item.Status.Phase), retErr) }()
	log = logf.FromContext(ctx)
	s.log = log

	// 2. Responsibility. Nothing is written before it is established.
	responsible, err := r.checkResponsibility(ctx, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	if hr, err := r.executeHooks(ctx, s, extension.DuringResponsibilityCheckHook); err != nil {
		return reconcile.Result{}, err
	} else if hr != nil {
		s.hookResult = extension.AggregateHookResults(extension.DuringResponsibilityCheckHook, s.hookResult, hr)
		responsible = !hr.AbortReconcile
	}
	if !responsible {
		log.V(1).Info("not responsible for deploy item")
		if d := item.Status.Deployer; d != nil && d.Name == r.opts.Name && d.Identity == r.opts.Identity {
			// Served by this deployer before (its Target moved): its series go.
			r.forget(req.NamespacedName)
		}
		return s.finalResult(), nil
	}
	// Only the responsible deployer reports an unknown operation value.
	r.checkOperation(s)
	if s.targetErr == nil {
		if s.targetErr, err = r.checkContext(ctx, s.item); err != nil {
			return reconcile.Result{}, err
		}
	}
	if stop, err := r.runHooks(ctx, s, extension.AfterResponsibilityCheckHook); err != nil || stop {
		return s.finalResult(), err
	}

	// From here on every change to the item is written once, at the end.
	defer func() {
		if s.abandoned {
			return // an early write failed; the reconcile has said why
		}
		if err := r.patch(ctx, s); err != nil {
			s.discard = true
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				// Someone else changed the item meanwhile; the watch brings it back.
				log.V(1).Info("deploy item changed while reconciling; retrying", "error", err.Error())
				res = extension.MinRequeue(res, reconcile.Result{RequeueAfter: minBackoff})
				return
			}
			retErr = errors.Join(retErr, err)
			return
		}
		if s.removeFinalizer {
			r.forget(req.NamespacedName)
			return
		}
		r.metrics.Phase(item.Namespace, item.Name, string(s.item.Status.Phase))
	}()
	return r.doReconcile(ctx, s)
}

// forget drops what the deployer keeps about an item it no longer serves.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key.Namespace, key.Name)
	r.clock.Forget(key)
	r.superseded.Forget(key)
	r.unknownOps.Forget(key)
}

// staleCacheRequeue is how soon a reconcile that found a copy older than
// the deployer's own last write looks again.
const staleCacheRequeue = 50 * time.Millisecond

// doReconcile runs the phases after responsibility: contract, should-reconcile,
// the deployer operation, End hooks.
func (r *Reconciler) doReconcile(ctx context.Context, s *scope) (reconcile.Result, error) {
	// 3. Contract: annotations, job IDs, generation. A job that starts is
	// worked on in this same reconcile: a synchronous deployer (the mock, a
	// manifest apply that needs no waiting) writes the final phase in the
	// one status write that also starts the job (Init is not written on its
	// own: the first write shows Progressing, Succeeded or Failed).
	// (No event: a job start is no outcome; the log line, the trace and
	// terrace_jobs_started_total record it.)
	s.started = r.handleContract(ctx, s)

	// 4. Should reconcile.
	should := r.shouldReconcile(s)
	forced := false
	hr, err := r.executeHooks(ctx, s, extension.ShouldReconcileHook)
	if err != nil {
		return reconcile.Result{}, err
	}
	if hr != nil {
		s.hookResult = extension.AggregateHookResults(extension.ShouldReconcileHook, s.hookResult, hr)
		if !hr.AbortReconcile && !should {
			should, forced = true, true
		}
	}
	if !should {
		r.dropStaleAnnotations(s)
		return s.finalResult(), nil
	}

	// The finalizer (with the pickup: reconcile-time removed) is on the item
	// before the deployer touches anything the item describes, so a deletion
	// from now on always runs the uninstall. Same number of writes: the
	// metadata patch only moves ahead of the status write.
	if s.addFinalizer && s.item.DeletionTimestamp == nil {
		if err := r.persistMetadata(ctx, s); err != nil {
			s.abandoned, s.discard = true, true
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				s.log.V(1).Info("deploy item changed before the job started; retrying", "error", err.Error())
				return reconcile.Result{RequeueAfter: minBackoff}, nil
			}
			return reconcile.Result{}, err
		}
	}

	// 5. Exactly one operation.
	if stop, err := r.runHooks(ctx, s, extension.BeforeAnyReconcileHook); err != nil || stop {
		return s.finalResult(), err
	}
	var (
		stop  bool
		opErr error
	)
	switch op := lsv1alpha1.Operation(s.item.Annotations[lsv1alpha1.OperationAnnotation]); {
	case op == lsv1alpha1.OperationAbort:
		stop, opErr = r.runAbort(ctx, s)
	case s.item.DeletionTimestamp != nil:
		// Before force-reconcile: an item being deleted is never re-applied
		// (decideStart drops a force-reconcile on it), or it would re-create
		// what its deletion removes.
		stop, opErr = r.runDelete(ctx, s)
	case op == lsv1alpha1.OperationForceReconcile:
		stop, opErr = r.runReconcile(ctx, s, extension.BeforeForceReconcileHook, false)
	default:
		stop, opErr = r.runReconcile(ctx, s, extension.BeforeReconcileHook, forced)
	}
	if opErr != nil || stop {
		// A Before* hook ended the reconcile (or failed): no End hooks.
		return s.finalResult(), opErr
	}

	// 6. End hooks.
	if _, err := r.runHooks(ctx, s, extension.EndHook); err != nil {
		return reconcile.Result{}, err
	}
	return s.finalResult(), nil
}

// runHooks executes the hooks of type ht, folds their result into the
// reconcile's and reports whether they asked to end the reconcile.
func (r *Reconciler) runHooks(ctx context.Context, s *scope, ht extension.HookType) (bool, error) {
	hr, err := r.executeHooks(ctx, s, ht)
	if err != nil {
		return true, err
	}
	if hr == nil {
		return false, nil
	}
	s.hookResult = extension.AggregateHookResults(ht, s.hookResult, hr)
	return hr.AbortReconcile, nil
}

// executeHooks executes the hooks of type ht; a hook error is an
// ExtensionHook Event on the item (every hook type alike) and ends the
// reconcile with that error (retried with back-off).
func (r *Reconciler) executeHooks(ctx context.Context, s *scope, ht extension.HookType) (*extension.HookResult, error) {
	hr, err := r.hooks.ExecuteHooks(ctx, s.log, s.item, s.target, ht)
	if err != nil && s.item != nil {
		r.event(s, corev1.EventTypeWarning, OperationHook, "%s hook: %v", ht, err)
	}
	return hr, err
}

// prevError is the lastError of the job this reconcile works on as the
// reconcile found it: none when the reconcile started the job.
func (s *scope) prevError() *lsv1alpha1.Error {
	if s.started {
		return nil
	}
	return s.orig.Status.LastError
}

// finalResult merges the hooks' result with the deployer's requeue request.
func (s *scope) finalResult() reconcile.Result {
	res := s.result
	if s.hookResult != nil {
		res = extension.MinRequeue(res, s.hookResult.ReconcileResult)
	}
	return res
}

// checkResponsibility resolves the item's Target and decides whether this
// deployer serves the item. Target problems of an item the deployer serves
// are kept in s.targetErr and fail the job later, so they are reported.
func (r *Reconciler) checkResponsibility(ctx context.Context, s *scope) (bool, error) {
	if s.item.Spec.Type != r.opts.Type {
		return false, nil
	}
	// An item without a (readable) Target is served as if its Target had no
	// annotations and labels: the deployer of the default environment (no
	// selector, or one like "!landscaper.gardener.cloud/environment") reports
	// the problem, deployers of fenced environments stay silent.
	selective := !r.opts.TargetSelector.Matches(&lsv1alpha1.Target{})
	ref := s.item.Spec.Target
	if ref == nil {
		if r.opts.TargetType != "" {
			s.targetErr = ConfigError(ReasonTargetNotFound, "spec.target: deploy items of type %s need a Target of type %s", r.opts.Type, r.opts.TargetType)
		}
		return !selective, nil
	}
	if ref.Namespace != "" && ref.Namespace != s.item.Namespace {
		s.targetErr = ConfigError(ReasonTargetNamespace, "spec.target: Target %s/%s is in another namespace than the deploy item (%s); only Targets in the item's own namespace may be used", ref.Namespace, ref.Name, s.item.Namespace)
		return !selective, nil
	}
	target := &lsv1alpha1.Target{}
	// Read from the API server when the cache does not show it (stale.Get):
	// a Target created right before its item must not fail the job.
	if err := stale.Get(ctx, r.client, r.reader, types.NamespacedName{Namespace: s.item.Namespace, Name: ref.Name}, target); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading Target %s/%s: %w", s.item.Namespace, ref.Name, err)
		}
		s.targetErr = ConfigError(ReasonTargetNotFound, "spec.target: Target %s/%s not found", s.item.Namespace, ref.Name)
		return !selective, nil
	}
	// The Target is kept also when the selector does not match: a
	// DuringResponsibilityCheck hook may still make the deployer responsible,
	// and the deployer then gets the item's Target like any other.
	s.target = target
	if r.opts.TargetType != "" && target.Spec.Type != r.opts.TargetType {
		s.targetErr = ConfigError(ReasonTargetType, "Target %s/%s has type %q; deploy items of type %s need type %q", target.Namespace, target.Name, target.Spec.Type, r.opts.Type, r.opts.TargetType)
	}
	return r.opts.TargetSelector.Matches(target), nil
}

// checkContext verifies that the item's Context exists; a missing Context
// named "default" counts as empty (the brief), any other is a configuration error.
func (r *Reconciler) checkContext(ctx context.Context, di *lsv1alpha1.DeployItem) (configErr, err error) {
	name := di.Spec.Context
	if name == "" || name == lsv1alpha1.DefaultContextName {
		return nil, nil
	}
	if err := stale.Get(ctx, r.client, r.reader, types.NamespacedName{Namespace: di.Namespace, Name: name}, &lsv1alpha1.Context{}); err != nil {
		if apierrors.IsNotFound(err) {
			return ConfigError(ReasonContextNotFound, "spec.context: Context %s/%s not found", di.Namespace, name), nil
		}
		return nil, fmt.Errorf("reading Context %s/%s: %w", di.Namespace, name, err)
	}
	return nil, nil
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
			// dropped (see handleContract's log line), the deletion goes on.
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

// handleContract applies the start conditions of the brief. It reports
// whether a job was started (the reconcile then ends after writing it).
func (r *Reconciler) handleContract(ctx context.Context, s *scope) bool {
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
		return false
	}

	now := metav1.NewTime(r.now())
	if d.own {
		di.Status.JobID = jobid.New()
		// A job of its own is a trace of its own (this reconcile's span is its
		// root): the later reconciles continue it from the annotation, written
		// with the metadata patch that follows the status write. Only while
		// tracing is on.
		if v, ok := tracing.ContextToWrite(ctx, di.Annotations); ok {
			s.setAnnotations = map[string]string{tracing.TraceContextAnnotation: v}
		}
		trace.SpanFromContext(ctx).SetAttributes(tracing.AttrJobID.String(di.Status.JobID))
	}
	di.Status.Phase = lsv1alpha1.PhaseInit
	di.Status.LastReconcileTime = &now
	di.Status.ObservedGeneration = di.Generation
	di.Status.LastError = nil
	di.Status.Deployer = &lsv1alpha1.DeployerInformation{Name: r.opts.Name, Identity: r.opts.Identity, Version: r.opts.Version}
	r.setReady(s, metav1.ConditionFalse, ReasonJobStarted, "job started: "+d.why)
	if !controllerutil.ContainsFinalizer(di, lsv1alpha1.Finalizer) {
		s.addFinalizer = true
	}
	key, job := client.ObjectKeyFromObject(di), di.Status.JobID
	var latency time.Duration = -1
	if stamp, ok := di.Annotations[lsv1alpha1.ReconcileTimeAnnotation]; ok {
		// The execution handed the job over at the stamp (RFC 3339; the
		// fraction, when present, makes the latency exact).
		if t, err := time.Parse(time.RFC3339, stamp); err == nil {
			latency = max(now.Sub(t), 0)
		}
	}
	s.after = append(s.after, func() {
		r.clock.Start(key, job, now.Time)
		r.metrics.JobStarted()
		if latency >= 0 {
			pickupLatency.WithLabelValues(r.opts.Name).Observe(latency.Seconds())
		}
	})
	s.log.Info("starting job", "jobID", di.Status.JobID, "reason", d.why, "generation", di.Generation)
	return true
}

// shouldReconcile is the default should-reconcile check.
func (r *Reconciler) shouldReconcile(s *scope) bool {
	di := s.item
	op := lsv1alpha1.Operation(di.Annotations[lsv1alpha1.OperationAnnotation])
	if op == lsv1alpha1.OperationAbort {
		return inJob(di.Status.Phase) && di.Status.Phase != lsv1alpha1.PhaseDeleting
	}
	// A deletion is decided by the deletion alone: a force-reconcile on an
	// item being deleted is dropped (decideStart), not run — re-applying
	// would re-create objects that nothing deletes any more once the
	// finalizer is gone (another finalizer may hold the item).
	if di.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(di, lsv1alpha1.Finalizer) {
			return false
		}
		// A deletion that failed for good waits for a change (e.g. the user
		// adding delete-without-uninstall); the watch brings that.
		failedDelete := di.Status.Phase == lsv1alpha1.PhaseFailed && di.Status.LastError != nil && di.Status.LastError.Operation == OperationDelete
		return !failedDelete || di.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true"
	}
	if op == lsv1alpha1.OperationForceReconcile {
		return true
	}
	return inJob(di.Status.Phase)
}

// dropStaleAnnotations removes an abort request for an item that is not in a
// job any more: there is nothing to abort.
func (r *Reconciler) dropStaleAnnotations(s *scope) {
	if lsv1alpha1.Operation(s.item.Annotations[lsv1alpha1.OperationAnnotation]) == lsv1alpha1.OperationAbort {
		s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation, AbortReasonAnnotation)
	}
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

func (r *Reconciler) request(s *scope, forced bool) *Request {
	return &Request{Item: s.item, Target: s.target, Deadline: r.deadline(s.item), Forced: forced, Log: s.log}
}

// deadline is lastReconcileTime + the item's timeout: spec.timeout, else
// the deployer's default (zero time: none).
func (r *Reconciler) deadline(di *lsv1alpha1.DeployItem) time.Time {
	t := r.opts.DefaultTimeout
	if di.Spec.Timeout != nil {
		// The schema admits only durations and "none"; a value Parse
		// refuses (zero) falls back to the default, as the execution
		// controller's progressing timeout does.
		if v, err := timeout.Parse(string(*di.Spec.Timeout)); err == nil {
			t = v
		}
	}
	if t.Disabled {
		return time.Time{}
	}
	start := r.now()
	if di.Status.LastReconcileTime != nil {
		start = di.Status.LastReconcileTime.Time
	}
	return start.Add(t.Duration)
}

func (r *Reconciler) runAbort(ctx context.Context, s *scope) (bool, error) {
	if stop, err := r.runHooks(ctx, s, extension.BeforeAbortHook); err != nil || stop {
		return true, err
	}
	actx, span := tracing.StartStep(ctx, tracer(), Kind, "Abort", AttrDeployer.String(r.opts.Name))
	res, err := r.deployer.Abort(actx, r.request(s, false))
	tracing.EndStep(span, err)
	if err == nil && res.Pending {
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: res.RequeueAfter})
		return false, nil
	}
	reason, msg, codes := abortError(s.item)
	if err != nil {
		msg += "; clean-up failed: " + err.Error()
	}
	s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation, lsv1alpha1.AbortTimeAnnotation, AbortReasonAnnotation)
	r.fail(s, OperationAbort, reason, msg, codes)
	return false, nil
}

// AbortReasonAnnotation says why the execution controller asked for an abort
// (lsv1alpha1.AbortReasonAnnotation).
const AbortReasonAnnotation = lsv1alpha1.AbortReasonAnnotation

// abortError is the lastError of an aborted job. An abort the execution
// controller's progressing timeout requested ends as Landscaper reports a
// progressing timeout (reason ProgressingTimeout, ERR_TIMEOUT), the timeout
// in the message; any other abort (a user's) is "aborted on request"
// (ERR_INTERRUPTED). The reason annotation counts only beside an abort-time
// of the current job (not older than its start): one left over from an
// earlier job does not turn a user's abort into a timeout.
func abortError(di *lsv1alpha1.DeployItem) (reason, msg string, codes []lsv1alpha1.ErrorCode) {
	why, ok := di.Annotations[AbortReasonAnnotation]
	if ok {
		at, err := time.Parse(time.RFC3339, di.Annotations[lsv1alpha1.AbortTimeAnnotation])
		ok = err == nil && (di.Status.LastReconcileTime == nil || !at.Before(di.Status.LastReconcileTime.Time))
	}
	if ok {
		if r, detail, found := strings.Cut(why, ": "); found && r == ReasonProgressingTimeout {
			return ReasonProgressingTimeout, "aborted by the execution controller: " + detail,
				[]lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout}
		}
	}
	msg = "aborted on request (operation: abort)"
	if ok && why != "" {
		msg += ": " + why
	}
	return ReasonAborted, msg, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorInterrupted}
}

// runReconcile calls Reconcile (or ForceReconcile) and maps the outcome to
// the phase.
func (r *Reconciler) runReconcile(ctx context.Context, s *scope, before extension.HookType, forced bool) (bool, error) {
	if stop, err := r.runHooks(ctx, s, before); err != nil || stop {
		return true, err
	}
	di := s.item
	operation := OperationReconcile
	if before == extension.BeforeForceReconcileHook {
		operation = OperationForceReconcile
		s.removeAnnotations = append(s.removeAnnotations, lsv1alpha1.OperationAnnotation)
	}
	if forced {
		// A hook-forced re-apply of a finished item: a fresh reconcile time,
		// the same job.
		now := metav1.NewTime(r.now())
		di.Status.LastReconcileTime = &now
	}
	// The deployer always works on the current spec.
	di.Status.ObservedGeneration = di.Generation
	if di.Status.Deployer == nil || di.Status.Deployer.Identity != r.opts.Identity {
		di.Status.Deployer = &lsv1alpha1.DeployerInformation{Name: r.opts.Name, Identity: r.opts.Identity, Version: r.opts.Version}
	}

	var (
		res Result
		err = s.targetErr
	)
	if err == nil {
		req := r.request(s, forced)
		// The deployer's work is a span of its own: "DeployItem.Apply".
		actx, span := tracing.StartStep(ctx, tracer(), Kind, "Apply", AttrDeployer.String(r.opts.Name), attribute.String("terrace.operation", operation))
		if operation == OperationForceReconcile {
			res, err = r.deployer.ForceReconcile(actx, req)
		} else {
			res, err = r.deployer.Reconcile(actx, req)
		}
		if res.Pending {
			span.SetAttributes(attribute.Bool("terrace.pending", true))
		}
		tracing.EndStep(span, err)
	}
	r.outcome(s, operation, lsv1alpha1.PhaseProgressing, ReasonReconcileFailed, res, err)
	return false, nil
}

func (r *Reconciler) runDelete(ctx context.Context, s *scope) (bool, error) {
	if stop, err := r.runHooks(ctx, s, extension.BeforeDeleteHook); err != nil || stop {
		return true, err
	}
	di := s.item
	if di.Status.Phase != lsv1alpha1.PhaseDeleting {
		r.startDeletion(s)
		r.event(s, corev1.EventTypeNormal, ReasonDeleting, "deleting")
	}
	if di.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true" {
		r.event(s, corev1.EventTypeNormal, ReasonUninstallSkipped, "delete-without-uninstall: leaving installed objects in place")
		s.removeFinalizer = true
		return false, nil
	}
	var (
		res Result
		err = s.targetErr
	)
	if err != nil && r.nothingToUninstall(di) {
		// Nothing was installed (typically: the Target or Context was wrong
		// from the start, so no job ever reached the deployer): there is
		// nothing to uninstall, and no Target or Context is needed for it.
		// Only the library's own export Secret, if any, goes.
		if di.Status.ExportReference != nil {
			if err := DeleteExport(ctx, r.client, di); err != nil {
				r.outcome(s, OperationDelete, lsv1alpha1.PhaseDeleting, ReasonDeleteFailed, Result{}, err)
				return false, nil
			}
		}
		s.removeFinalizer = true
		r.event(s, corev1.EventTypeNormal, ReasonDeleted, "deleted; nothing to uninstall (%v); finalizer removed", s.targetErr)
		return false, nil
	}
	if err == nil {
		dctx, span := tracing.StartStep(ctx, tracer(), Kind, "Delete", AttrDeployer.String(r.opts.Name))
		res, err = r.deployer.Delete(dctx, r.request(s, false))
		tracing.EndStep(span, err)
	}
	if err == nil && !res.Pending {
		s.removeFinalizer = true
		r.event(s, corev1.EventTypeNormal, ReasonDeleted, "deleted; finalizer removed")
		return false, nil
	}
	r.outcome(s, OperationDelete, lsv1alpha1.PhaseDeleting, ReasonDeleteFailed, res, err)
	return false, nil
}

// nothingToUninstall reports whether the item has nothing installed that its
// deletion must remove: the deployer's UninstallChecker if it implements
// one, else an empty status.providerStatus (the deployer's record of what it
// installed; nil when Reconcile never ran).
func (r *Reconciler) nothingToUninstall(di *lsv1alpha1.DeployItem) bool {
	if c, ok := r.deployer.(UninstallChecker); ok {
		return c.NothingToUninstall(di)
	}
	return di.Status.ProviderStatus == nil || len(di.Status.ProviderStatus.Raw) == 0
}

// startDeletion enters phase Deleting with a fresh lastReconcileTime: the
// deletion's deadline (and the pending deletion's bound) counts from its own
// start, not from the last install job, which may be long past.
func (r *Reconciler) startDeletion(s *scope) {
	now := metav1.NewTime(r.now())
	s.item.Status.Phase = lsv1alpha1.PhaseDeleting
	s.item.Status.LastReconcileTime = &now
}

// outcome maps a deployer call's result to the status: done → Succeeded,
// pending → the running phase, permanent error (or past the deadline) →
// Failed, other errors → retried with back-off.
func (r *Reconciler) outcome(s *scope, operation string, running lsv1alpha1.Phase, defaultReason string, res Result, err error) {
	di := s.item
	dl := r.deadline(di)
	pastDeadline := !dl.IsZero() && r.now().After(dl)
	switch {
	case err == nil && !res.Pending:
		if running == lsv1alpha1.PhaseDeleting {
			return
		}
		di.Status.LastError = nil
		r.finish(s, lsv1alpha1.PhaseSucceeded)
		msg := res.Message
		if msg == "" {
			msg = "job " + di.Status.JobID + " succeeded"
		}
		r.setReady(s, metav1.ConditionTrue, ReasonSucceeded, msg)
	case err == nil && running == lsv1alpha1.PhaseDeleting && pastDeadline:
		// Nobody aborts a deletion (the execution controller's progressing
		// timeout is for install jobs): one that is still pending at its
		// deadline fails, and the execution reports DeleteFailed.
		msg := "the deletion did not finish within its timeout"
		if res.Message != "" {
			msg += ": " + res.Message
		}
		r.fail(s, operation, ReasonTimeout, msg, []lsv1alpha1.ErrorCode{lsv1alpha1.ErrorTimeout})
	case err == nil:
		// Pending work is bounded by the deployer itself (it gets the
		// deadline in the Request): the mock's "Progressing" must stay
		// pending until the execution controller aborts it.
		di.Status.Phase = running
		r.setReady(s, metav1.ConditionFalse, string(running), res.Message)
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: res.RequeueAfter})
		if running == lsv1alpha1.PhaseDeleting && !dl.IsZero() {
			// Back at the deadline at the latest, to end the deletion there.
			s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: max(dl.Sub(r.now())+100*time.Millisecond, 100*time.Millisecond)})
		}
	default:
		reason, msg, codes := toLastError(operation, defaultReason, err)
		if IsPermanent(err) || pastDeadline {
			if !IsPermanent(err) {
				codes = append(codes, lsv1alpha1.ErrorTimeout)
			}
			r.fail(s, operation, reason, msg, codes)
			return
		}
		// Retry: stay in the running phase, report the error, back off.
		di.Status.Phase = running
		backoff := minBackoff
		if le := s.prevError(); le != nil && le.Reason == reason {
			backoff = min(max(2*r.now().Sub(le.LastTransitionTime.Time), minBackoff), maxBackoff)
		}
		if !dl.IsZero() {
			backoff = min(backoff, max(time.Until(dl), 100*time.Millisecond))
		}
		r.setError(s, operation, reason, msg, codes)
		s.log.Info("retrying after error", "operation", operation, "reason", reason, "error", msg, "after", backoff)
		s.result = extension.MinRequeue(s.result, reconcile.Result{RequeueAfter: backoff})
	}
}

// finish ends the job: final phase and jobIDFinished in one write.
func (r *Reconciler) finish(s *scope, phase lsv1alpha1.Phase) {
	di := s.item
	di.Status.Phase = phase
	di.Status.JobIDFinished = di.Status.JobID
	if phase == lsv1alpha1.PhaseSucceeded && (s.started || s.orig.Status.Phase != lsv1alpha1.PhaseSucceeded) {
		r.event(s, corev1.EventTypeNormal, ReasonSucceeded, "job %s succeeded", di.Status.JobID)
	}
	// A job (Init, Progressing) ends; a failed deletion is no job.
	if p := s.orig.Status.Phase; s.started || p == lsv1alpha1.PhaseInit || p == lsv1alpha1.PhaseProgressing {
		key, job, now := client.ObjectKeyFromObject(di), di.Status.JobID, r.now()
		var fallback time.Time
		if di.Status.LastReconcileTime != nil {
			fallback = di.Status.LastReconcileTime.Time
		}
		s.after = append(s.after, func() {
			r.metrics.JobFinished(string(phase), r.clock.Finish(key, job, fallback, now))
		})
	}
}

// fail ends the job Failed with lastError; besides the event of the error
// (its reason) it emits the transition: Failed, or DeleteFailed for a
// deletion.
func (r *Reconciler) fail(s *scope, operation, reason, message string, codes []lsv1alpha1.ErrorCode) {
	switch {
	case operation == OperationDelete:
		// Every failed deletion says how to go on (the finalizer stays
		// until one of the two happens).
		message += deleteFailedHint
	case reason == ReasonTargetNotFound && s.item.Spec.Target != nil:
		// The item's Target is missing (without spec.target, the reason says
		// the item's type needs one: no Target to create). The job has
		// ended: a Target created now does not restart it.
		message += missingTargetHint
	}
	r.finish(s, lsv1alpha1.PhaseFailed)
	r.setError(s, operation, reason, message, codes)
	transition := ReasonFailed
	if operation == OperationDelete {
		transition = ReasonDeleteFailed
	}
	if transition != reason && (s.started || s.orig.Status.Phase != lsv1alpha1.PhaseFailed) {
		r.event(s, corev1.EventTypeWarning, transition, "job %s ended Failed (%s)", s.item.Status.JobID, reason)
	}
}

// missingTargetHint ends the lastError message of an install job that failed
// because its Target does not exist.
var missingTargetHint = fmt.Sprintf("; create it, then retry with the annotation %s: %s (or let the next job of the item's execution pick it up)",
	lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)

// deleteFailedHint ends the lastError message of every failed deletion.
var deleteFailedHint = fmt.Sprintf("; fix the cause and retry the deletion with the annotation %s: %s, or annotate the item with %s: \"true\" to delete it without uninstalling",
	lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile, lsv1alpha1.DeleteWithoutUninstallAnnotation)

// setError records lastError; an unchanged error keeps its times, so
// repeating it writes nothing.
func (r *Reconciler) setError(s *scope, operation, reason, message string, codes []lsv1alpha1.ErrorCode) {
	di := s.item
	now := metav1.NewTime(r.now())
	prev := s.prevError()
	if prev != nil && prev.Operation == operation && prev.Reason == reason && prev.Message == message && slices.Equal(prev.Codes, codes) {
		di.Status.LastError = prev.DeepCopy()
	} else {
		le := &lsv1alpha1.Error{Operation: operation, Reason: reason, Message: message, Codes: codes, LastTransitionTime: now, LastUpdateTime: now}
		if prev != nil && prev.Reason == reason {
			le.LastTransitionTime = prev.LastTransitionTime
		}
		di.Status.LastError = le
		r.event(s, corev1.EventTypeWarning, reason, "%s: %s", operation, message)
	}
	r.setReady(s, metav1.ConditionFalse, reason, message)
}

func (r *Reconciler) setReady(s *scope, status metav1.ConditionStatus, reason, message string) {
	if reason == "" {
		reason = "Unknown"
	}
	meta.SetStatusCondition(&s.item.Status.Conditions, metav1.Condition{
		Type:               lsv1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.item.Generation,
	})
}

// event emits an event on the item once the reconcile's writes succeeded.
func (r *Reconciler) event(s *scope, eventType, reason, format string, args ...any) {
	obj := s.orig
	s.after = append(s.after, func() {
		r.recorder.Eventf(obj, nil, eventType, reason, reason, format, args...)
	})
}
