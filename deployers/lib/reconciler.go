package lib

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/metrics"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/kit/unknownop"
)

// The deployer library reads and writes deploy items, reads Targets, and
// records Events (events.k8s.io only: the core group's Events are the
// manager's leader election's, in its own namespace). Deployers add their
// own markers.
//
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=deployitems/status,verbs=patch
// +kubebuilder:rbac:groups=landscaper.gardener.cloud,resources=targets;contexts,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

const (
	// targetIndex indexes cached items by "<namespace>/<spec.target.name>".
	targetIndex = "terrace.dev/target"
	// typeField is the CRD's selectable field the item informer filters on.
	typeField = "spec.type"

	minBackoff = time.Second
	maxBackoff = time.Minute

	// staleCacheRequeue is how soon a reconcile that found a copy older than
	// the deployer's own last write looks again.
	staleCacheRequeue = 50 * time.Millisecond
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
	// ownWrites are the resourceVersions this deployer's own writes
	// replaced, per item. A reconcile that finds one of them in the cache
	// works from a copy older than the deployer's own write: it waits for the
	// cache instead of computing a write that could only conflict.
	ownWrites stale.Versions
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
	items, err := newItemCache(mgr, opts)
	if err != nil {
		return nil, err
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

// newItemCache is the informer cache of the items of opts.Type, indexed by
// Target and added to mgr. A field selector on spec.type (a selectable field
// of the CRD) keeps other deployers' items out of this process entirely: not
// cached, no events.
func newItemCache(mgr ctrl.Manager, opts Options) (cache.Cache, error) {
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
	return items, nil
}

// Options returns the effective options (defaults applied).
func (r *Reconciler) Options() Options { return r.opts }

type requestKey struct{}

// RequestFromContext returns the deploy item a reconcile is for. Hooks of type
// Start, which get no item, use it to tell reconciles apart.
func RequestFromContext(ctx context.Context) (reconcile.Request, bool) {
	req, ok := ctx.Value(requestKey{}).(reconcile.Request)
	return req, ok
}

// scope is the state of one reconcile.
type scope struct {
	req  reconcile.Request
	log  logr.Logger
	orig *lsv1alpha1.DeployItem
	item *lsv1alpha1.DeployItem
	// target is the item's Target; targetErr a problem with it (or with the
	// item's Context), reported when the job runs.
	target    *lsv1alpha1.Target
	targetErr error

	// patcher writes the status once, at the end; nil until the deployer is
	// known to be responsible (nothing is written before).
	patcher           *status.Patcher
	removeAnnotations []string
	// setAnnotations are written with the metadata patch (the trace context
	// of a job the deployer starts itself).
	setAnnotations  map[string]string
	addFinalizer    bool
	removeFinalizer bool
	// reports run once the reconcile's writes succeeded (or none was
	// needed): events and metrics of the transitions they hold, so a write
	// that conflicts reports nothing twice.
	reports []func()
	// discard drops reports: a write failed.
	discard bool
	// started: this reconcile started a job (and goes on to work on it);
	// what s.orig says about the previous job (phase, lastError) does not
	// apply to it.
	started bool
	// forced: a ShouldReconcile hook forced the reconcile of an item that
	// had finished its job.
	forced bool

	// hookResult aggregates the results of every hook type run so far.
	hookResult *extension.HookResult
	// result is the deployer's requeue request.
	result reconcile.Result
}

// Reconcile runs the contract for one item, in the order of seed 003. See
// the package documentation.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, retErr error) {
	log := logf.FromContext(ctx).WithValues("deployer", r.opts.Name, "type", r.opts.Type)
	ctx = context.WithValue(logf.IntoContext(ctx, log), requestKey{}, req)
	s := &scope{req: req, log: log}
	defer s.report()

	if out, err := flow.Run(ctx, s, r.runStartHooks, r.readItem); err != nil || out.Stopped() {
		return s.end(err)
	}
	ctx, span := r.startSpan(ctx, s)
	defer func() { tracing.EndReconcile(span, string(s.item.Status.Phase), retErr) }()
	defer r.writeItem(ctx, s, &res, &retErr)

	_, err := flow.Run(ctx, s,
		r.checkResponsibility,
		r.reportUnknownOperation,
		r.checkContext,
		r.runAfterResponsibilityHooks,
		r.beginWrites,
		r.startJob,
		r.decideReconcile,
		r.ensureFinalizer,
		r.runBeforeAnyReconcileHooks,
		r.runOperation,
		r.runEndHooks,
	)
	return s.end(err)
}

// readItem reads the item from the type-filtered cache; a copy older than
// the deployer's own last write waits for the cache.
func (r *Reconciler) readItem(ctx context.Context, s *scope) (flow.Result, error) {
	item := &lsv1alpha1.DeployItem{}
	if err := r.items.Get(ctx, s.req.NamespacedName, item); err != nil {
		s.only(reconcile.Result{})
		if apierrors.IsNotFound(err) {
			r.forget(s.req.NamespacedName)
			return flow.Stop(), nil
		}
		return flow.Stop(), err
	}
	if r.ownWrites.Stale(s.req.NamespacedName, item.ResourceVersion) {
		// The cache has not caught up with this deployer's own last write
		// yet; its watch event (or this requeue, should the event be
		// filtered) brings the current copy.
		s.log.V(1).Info("cached deploy item older than the deployer's last write; waiting for the cache", "resourceVersion", item.ResourceVersion)
		s.only(reconcile.Result{RequeueAfter: staleCacheRequeue})
		return flow.Stop(), nil
	}
	s.orig, s.item = item, item.DeepCopy()
	return flow.Continue(), nil
}

// beginWrites snapshots the item: from here on every change to it is
// written once, at the end (writeItem).
func (r *Reconciler) beginWrites(_ context.Context, s *scope) (flow.Result, error) {
	p, err := r.newPatcher(s.orig)
	if err != nil {
		return flow.Stop(), err
	}
	s.patcher = p
	return flow.Continue(), nil
}

// end is what the reconcile returns: the merged requeue requests of the
// deployer and the hooks, or the error (whose back-off decides).
func (s *scope) end(err error) (reconcile.Result, error) {
	if err != nil {
		return reconcile.Result{}, err
	}
	return s.finalResult(), nil
}

// finalResult merges the hooks' result with the deployer's requeue request.
func (s *scope) finalResult() reconcile.Result {
	res := s.result
	if s.hookResult != nil {
		res = extension.MinRequeue(res, s.hookResult.ReconcileResult)
	}
	return res
}

// only makes res the reconcile's whole result: a reconcile that ends before
// the item is read (or from a stale copy) asks nothing of what the Start
// hooks requested.
func (s *scope) only(res reconcile.Result) {
	s.hookResult, s.result = nil, res
}

// forget drops what the deployer keeps about an item it does not serve (any more).
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key.Namespace, key.Name)
	r.clock.Forget(key)
	r.ownWrites.Forget(key)
	r.unknownOps.Forget(key)
}
