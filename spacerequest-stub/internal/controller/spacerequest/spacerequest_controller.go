package spacerequest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// Defaults of the reconciler's settings.
const (
	// DefaultTerminationTimeout is how long a deleted SpaceRequest reports
	// Terminating before it reports UnableToTerminate.
	DefaultTerminationTimeout = 2 * time.Minute
	// DefaultTokenExpiration is the lifetime requested for kubeconfig tokens
	// (one year). The stub requests a new one at 80% of the lifetime the API
	// server actually granted (it may shorten it, see
	// --service-account-max-token-expiration).
	DefaultTokenExpiration = 365 * 24 * time.Hour
	// MinTokenExpiration is the shortest lifetime the TokenRequest API accepts.
	MinTokenExpiration = 10 * time.Minute
	// foreignNamespaceRetry is how often the stub looks again at a namespace
	// it cannot use because something else owns it (not the happy path:
	// nothing the stub watches tells it when that is resolved).
	foreignNamespaceRetry = time.Minute
	// clusterRoleRetry is how often the stub looks again at an edit
	// ClusterRole that grants nothing yet (not the happy path either).
	clusterRoleRetry = 30 * time.Second
	// minDeletionRetry and maxDeletionRetry bound how soon a deleted
	// SpaceRequest is looked at again when a deletion step failed, or when
	// its namespace is terminating but not in Managed (so no event will say
	// when it is gone). In between, the wait is a quarter of the time since
	// the deletion: a bounded back-off that needs no state and never
	// overshoots the termination timeout (see deletionRetry).
	minDeletionRetry = time.Second
	maxDeletionRetry = time.Minute
)

// Event reasons.
const (
	EventNamespaceCreated     = "NamespaceCreated"
	EventCredentialsIssued    = "CredentialsIssued"
	EventProvisioned          = "Provisioned"
	EventProvisioningFailed   = "ProvisioningFailed"
	EventTerminating          = "Terminating"
	EventUnableToTerminate    = "UnableToTerminate"
	EventTerminated           = "Terminated"
	EventNamespaceNotOwned    = "NamespaceNotOwned"
	EventNamespaceTerminating = "NamespaceTerminating"
	EventClusterRoleNotReady  = "ClusterRoleNotReady"
	EventTerminationFailed    = "TerminationFailed"
	// EventInvalidNamespaceLimits: the SpaceRequest's namespace limits
	// annotation does not parse, cannot work, or asks for more than the
	// ceilings allow.
	EventInvalidNamespaceLimits = "InvalidNamespaceLimits"
	// EventOrphanedNamespaceDeleted is recorded on a namespace the stub
	// deleted because its SpaceRequest is gone without the stub having
	// cleaned up (its finalizer was removed by hand).
	EventOrphanedNamespaceDeleted = "OrphanedNamespaceDeleted"
)

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate). ServiceAccounts, their
// tokens and RoleBindings only of the names ServiceAccountName and
// RoleBindingName: a token request names the ServiceAccount in its URL; the
// stub writes both with server-side apply, a PATCH naming the object, which
// kube-apiserver also authorizes as "create" of that name when it creates
// the object; and the stub lists and watches them with a field selector on
// that name (ManagedCacheOptions). Namespaces and Secrets have a name per
// SpaceRequest, and the stub creates them with a POST (whose authorization
// has no name), so those rules cannot name them. ResourceQuotas and
// LimitRanges are handled as RoleBindings: one name each, applied. Only the verbs the code
// uses: caches list and watch (they never get); only namespaces and Secrets
// are read one by one from the API server (APIReader), so only they have
// get (a SpaceRequest is confirmed gone with a list of its one name, see
// deleteOrphanedNamespace). rbac_test.go asserts the exact verbs per
// resource. See README.md.
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=list;watch;patch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests/status,verbs=patch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=list;watch;create;patch,resourceNames=namespace-manager
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create,resourceNames=namespace-manager
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=list;watch;create;patch,resourceNames=namespace-manager-edit
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=list;watch;create;patch,resourceNames=namespace-quota
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=list;watch;create;patch,resourceNames=namespace-limits
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=list;watch;bind,resourceNames=edit
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler serves SpaceRequests.
type Reconciler struct {
	// Client reads SpaceRequests through the manager's cache and writes to
	// the API server. It must not read the kinds Managed holds: that would
	// start an informer of every such object in the cluster.
	Client client.Client
	// APIReader reads directly from the API server: Secrets (so that the
	// stub caches no Secret contents), and what Managed does not hold.
	APIReader client.Reader
	// Managed holds the metadata of the namespaces, ServiceAccounts,
	// RoleBindings and Secrets the stub made, and nothing else (a cache built
	// with ManagedCacheOptions). An object it does not hold may still exist
	// without the stub's label: before the stub creates one, the API server
	// has the last word (see applyNamespace and issueCredentials).
	Managed cache.Cache
	// Recorder records events on SpaceRequests.
	Recorder events.EventRecorder
	// RoleReader reads the edit ClusterRole: a cache holding only that
	// ClusterRole (the stub's role lists and watches it, it does not get it).
	RoleReader client.Reader

	// TargetClusterURL is the API server URL written into kubeconfigs and
	// status.targetClusterURL.
	TargetClusterURL string
	// CAData is the PEM CA bundle written into kubeconfigs; empty means the
	// system roots (or Insecure).
	CAData []byte
	// Insecure writes insecure-skip-tls-verify into kubeconfigs.
	Insecure bool
	// TerminationTimeout is how long deletion may take before the
	// SpaceRequest reports UnableToTerminate.
	TerminationTimeout time.Duration
	// TokenExpiration is the token lifetime requested from the TokenRequest API.
	TokenExpiration time.Duration
	// Ceilings bound the quota a SpaceRequest may ask for.
	Ceilings Ceilings

	// now is the clock; nil means time.Now.
	now func() time.Time

	// ownWrites remembers, per SpaceRequest, the resourceVersions the
	// stub's own writes (finalizer, status) replaced. A reconcile that finds
	// one of them in the cache works from a copy older than the stub's own
	// write: it is skipped, as its writes could only conflict or repeat; the
	// watch event of that write brings the next reconcile.
	ownWrites stale.Versions
	// outcomes ends each reconcile and counts conflicts in a row per
	// SpaceRequest (flow.Outcomes).
	outcomes flow.Outcomes
	// written remembers the resourceVersion of the stub's last write (or
	// full read) of a RoleBinding or kubeconfig Secret (string key →
	// string). The cache holds only their metadata: a cached copy at that
	// resourceVersion is known to hold what the stub wrote, so it needs
	// neither a read nor a write. This is not stale.Versions' rule (a copy
	// older than a write is skipped) but its converse (a copy at exactly the
	// written version is current), used only here. A kubeconfig Secret
	// found to be someone else's is remembered with "" (see tracked).
	written sync.Map
	// unseen remembers the namespaces and kubeconfig Secrets the stub
	// created that Managed has not shown yet (see unseenCreates).
	unseen unseenCreates
	// deletedNamespaces remembers the namespaces the stub deleted that
	// Managed does not show terminating yet (see ownDeletions).
	deletedNamespaces ownDeletions
}

// SetupWithManager checks the reconciler's settings and registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	errs := []error{setup.Check("spacerequest", setup.Required("Client", r.Client),
		setup.Required("APIReader", r.APIReader), setup.Required("Managed", r.Managed), setup.Required("Recorder", r.Recorder),
		setup.Required("RoleReader", r.RoleReader))}
	if u, err := url.Parse(r.TargetClusterURL); err != nil || u.Scheme == "" || u.Host == "" {
		errs = append(errs, fmt.Errorf("spacerequest: target cluster URL %q is not an absolute URL", r.TargetClusterURL))
	}
	if r.TerminationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("spacerequest: termination timeout must be positive, got %s", r.TerminationTimeout))
	}
	if c := r.Ceilings; c.CPU.Sign() <= 0 || c.Memory.Sign() <= 0 || c.Pods.Sign() <= 0 || c.Storage.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("spacerequest: namespace ceilings must be positive, got cpu %s, memory %s, pods %s, storage %s",
			c.CPU.String(), c.Memory.String(), c.Pods.String(), c.Storage.String()))
	}
	if r.TokenExpiration < MinTokenExpiration {
		errs = append(errs, fmt.Errorf("spacerequest: token expiration must be at least %s, got %s", MinTokenExpiration, r.TokenExpiration))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	registerMetrics()

	// Only metadata of what the stub created is watched, from Managed: enough
	// to notice that something changed or went away (an object that loses
	// the stub's label leaves Managed: a delete event), no Secret contents.
	toOwner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
		&toolchainv1alpha1.SpaceRequest{}, handler.OnlyControllerOwner())
	toSpaceRequest := handler.EnqueueRequestsFromMapFunc(mapToSpaceRequest)
	return ctrl.NewControllerManagedBy(mgr).
		Named("spacerequest").
		For(&toolchainv1alpha1.SpaceRequest{}).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(secretGVK), seeingHandler{next: toOwner, seen: r.seenSecret})).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(namespaceGVK), seeingHandler{next: toSpaceRequest, seen: r.seenNamespace, gone: r.goneNamespace})).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(serviceAccountGVK), toSpaceRequest)).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(roleBindingGVK), toSpaceRequest)).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(resourceQuotaGVK), toSpaceRequest)).
		WatchesRawSource(source.Kind[client.Object](r.Managed, metadataOf(limitRangeGVK), toSpaceRequest)).
		Complete(r)
}

// mapToSpaceRequest maps an object the stub created to its SpaceRequest.
func mapToSpaceRequest(_ context.Context, o client.Object) []reconcile.Request {
	key := o.GetAnnotations()[SpaceRequestAnnotation]
	ns, name, ok := splitKey(key)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func splitKey(key string) (string, string, bool) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:], i > 0 && i < len(key)-1
		}
	}
	return "", "", false
}

// scope is the state of one reconcile.
type scope struct {
	sr *toolchainv1alpha1.SpaceRequest
	// patcher writes the status once, at the end of the reconcile; the
	// finalizer writes go through it too (Track), for the stale guard.
	patcher *status.Patcher
	// limits size the namespace's ResourceQuota and LimitRange.
	limits toolchainv1alpha1.NamespaceLimits
	// serviceAccountUID is the UID of the applied ServiceAccount.
	serviceAccountUID types.UID
	// wasReady: the SpaceRequest was Ready when the reconcile started (so
	// a namespace or kubeconfig made now repairs or renews, and is worth an
	// event of its own; during the first provisioning the Provisioned event
	// says it all).
	wasReady bool
	// wasProvisioned: the SpaceRequest had its namespace access in status
	// when the reconcile started (it is recovering, not provisioned for the
	// first time).
	wasProvisioned bool
	// gone: the SpaceRequest is gone, or its finalizer was removed (it goes).
	gone bool
	// failed is a deletion step's error that the reconcile reports in the
	// SpaceRequest's status and retries itself (see terminationFailed)
	// rather than returning it; it still marks the reconcile span.
	failed error
}

// provisioningSteps serve a SpaceRequest that exists.
func (r *Reconciler) provisioningSteps() []flow.Step[*scope] {
	return []flow.Step[*scope]{
		r.addFinalizer,
		r.markProvisioningStarted,
		r.checkClusterRole,
		r.loadNamespaceLimits,
		r.applyNamespace,
		r.applyNamespaceLimits,
		r.applyServiceAccount,
		r.applyRoleBinding,
		r.applyKubeconfigSecret,
		r.markProvisioned,
	}
}

// terminationSteps tear down what a deleted SpaceRequest was served with.
func (r *Reconciler) terminationSteps() []flow.Step[*scope] {
	return []flow.Step[*scope]{
		r.checkFinalizerPresent,
		r.markTerminating,
		r.deleteSecret,
		r.deleteNamespace,
		r.removeFinalizer,
	}
}

// Reconcile brings a SpaceRequest's namespace, credentials and status in line
// with its existence. The reconcile is the span "SpaceRequest.Reconcile",
// continuing the trace handed over in the SpaceRequest's trace-context
// annotation (by the provisioner that created it).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sr := &toolchainv1alpha1.SpaceRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.deleteOrphanedNamespace(ctx, req.NamespacedName)
	}
	if r.ownWrites.Stale(req.NamespacedName, sr.ResourceVersion) {
		// The cache is behind the stub's own write; that write's watch
		// event brings the next reconcile.
		ctrl.LoggerFrom(ctx).V(1).Info("cached SpaceRequest is older than the stub's last write, skipping", "resourceVersion", sr.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, sr, "")
	// persisted is the SpaceRequest's phase (its Ready reason) on the API
	// server after this reconcile, as far as the stub knows.
	persisted := readyReason(sr)
	patcher, err := status.NewPatcher(r.Client, sr, status.FieldOwner(FieldManager), status.RecordWrites(&r.ownWrites))
	if err != nil {
		tracing.EndReconcile(span, persisted, err)
		return ctrl.Result{}, err
	}
	s := &scope{sr: sr, patcher: patcher, wasReady: isReady(&sr.Status), wasProvisioned: len(sr.Status.NamespaceAccess) > 0}

	deleting := !sr.DeletionTimestamp.IsZero()
	var res flow.Result
	if deleting {
		res, err = flow.Run(ctx, s, r.terminationSteps()...)
		if err != nil && !apierrors.IsConflict(err) {
			// A conflict only means the cache was behind: retried quietly.
			res, err = r.terminationFailed(ctx, s, err), nil
		}
	} else {
		res, err = flow.Run(ctx, s, r.provisioningSteps()...)
		if err != nil && !apierrors.IsConflict(err) {
			r.setReady(sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, err.Error())
		}
	}
	if stored, writeErr := r.writeStatus(ctx, s); stored {
		persisted = readyReason(sr)
	} else {
		err = flow.Combine(err, writeErr)
	}

	if s.gone {
		r.forget(req.NamespacedName)
	} else {
		phases.Phase(req.Namespace, req.Name, persisted)
	}
	result, retErr := r.outcomes.Finish(ctx, req.NamespacedName, res, err, r.reportFailure(sr))
	tracing.EndReconcile(span, persisted, errors.Join(err, s.failed))
	return result, retErr
}

// reportFailure is the Warning event of a reconcile that failed: the
// failure of a deletion (terminationFailed records those of its steps) or
// of provisioning.
func (r *Reconciler) reportFailure(sr *toolchainv1alpha1.SpaceRequest) func(error) {
	return func(err error) {
		if !sr.DeletionTimestamp.IsZero() {
			r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, EventTerminationFailed, "Terminate", "%v", err)
			return
		}
		r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, EventProvisioningFailed, "Provision", "%v", err)
	}
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}
