// Package spacerequest is the spacerequest-stub's one reconciler: it serves a
// SpaceRequest with a namespace, a ServiceAccount holding the edit ClusterRole
// in that namespace only, and a kubeconfig Secret whose token comes from the
// TokenRequest API; it reports the result in the SpaceRequest's Ready
// condition and tears everything down again when the SpaceRequest is deleted.
package spacerequest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/text"
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
	// conflictRetry is how soon a status write that found the cache behind
	// is retried.
	conflictRetry = 500 * time.Millisecond
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
// has no name), so those rules cannot name them. Only the verbs the code
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

	// now is the clock; nil means time.Now.
	now func() time.Time

	// superseded remembers, per SpaceRequest, the resourceVersions the
	// stub's own writes (finalizer, status) replaced. A reconcile that finds
	// one of them in the cache works from a copy older than the stub's own
	// write: it is skipped, as its writes could only conflict or repeat; the
	// watch event of that write brings the next reconcile.
	superseded stale.Versions
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

// remember records that the object named key is, at resourceVersion rv,
// what the stub wrote.
func (r *Reconciler) remember(key, rv string) {
	if rv != "" {
		r.written.Store(key, rv)
	}
}

// tracked reports whether the stub remembers the object named key: it wrote
// it, or found it was someone else's (remembered with no resourceVersion).
func (r *Reconciler) tracked(key string) bool {
	_, ok := r.written.Load(key)
	return ok
}

// isKnown reports whether rv is the resourceVersion remembered for key.
func (r *Reconciler) isKnown(key, rv string) bool {
	v, ok := r.written.Load(key)
	return ok && rv != "" && v.(string) == rv
}

// forget drops what the reconciler keeps about a SpaceRequest that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	phases.Forget(key.Namespace, key.Name)
	r.superseded.Forget(key)
	sr := &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	r.written.Delete(secretKey(key.Namespace, SecretName(sr)))
	r.written.Delete(roleBindingKey(NamespaceName(sr)))
	r.unseen.forget(secretKey(key.Namespace, SecretName(sr)))
	r.unseen.forget(namespaceKey(NamespaceName(sr)))
}

func secretKey(namespace, name string) string { return "secret/" + namespace + "/" + name }

func roleBindingKey(namespace string) string {
	return "rolebinding/" + namespace + "/" + RoleBindingName
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
	// stop ends the list of phases early without an error (waiting).
	stop bool
	// skipStatus suppresses the deferred status patch (the object is gone
	// or about to be).
	skipStatus bool
	// serviceAccountUID is the UID of the applied ServiceAccount.
	serviceAccountUID types.UID
	// wasReady: the SpaceRequest was Ready when the reconcile started (so
	// a namespace or kubeconfig made now repairs or renews, and is worth an
	// event of its own; during the first provisioning the Provisioned event
	// says it all).
	wasReady bool
	// gone: the SpaceRequest is gone, or its finalizer was removed (it goes).
	gone bool
	// failed is a deletion step's error that the reconcile reports in the
	// SpaceRequest's status and retries itself (see terminationFailed)
	// rather than returning it; it still marks the reconcile span.
	failed error
}

type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// Reconcile brings a SpaceRequest's namespace, credentials and status in line
// with its existence. The reconcile is the span "SpaceRequest.Reconcile",
// continuing the trace handed over in the SpaceRequest's trace-context
// annotation (by the provisioner that created it).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	sr := &toolchainv1alpha1.SpaceRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.deleteOrphanedNamespace(ctx, req.NamespacedName)
	}
	if r.superseded.Stale(req.NamespacedName, sr.ResourceVersion) {
		// The cache is behind the stub's own write; that write's watch
		// event brings the next reconcile.
		ctrl.LoggerFrom(ctx).V(1).Info("cached SpaceRequest is older than the stub's last write, skipping", "resourceVersion", sr.ResourceVersion)
		return ctrl.Result{}, nil
	}
	ctx, span := tracing.StartReconcile(ctx, tracer(), Kind, sr, "")
	before := sr.Status.DeepCopy()
	s := &scope{sr: sr, wasReady: isReady(before)}
	// persisted is the SpaceRequest's phase (its Ready reason) on the API
	// server after this reconcile, as far as the stub knows.
	persisted := readyReasonOf(before)

	defer func() {
		if s.gone {
			r.forget(req.NamespacedName)
		} else {
			phases.Phase(req.Namespace, req.Name, persisted)
		}
		tracing.EndReconcile(span, persisted, errors.Join(retErr, s.failed))
	}()
	defer func() {
		if s.skipStatus {
			return
		}
		err := r.patchStatus(ctx, s, before)
		switch {
		case err == nil:
			if !s.gone {
				persisted = readyReason(sr)
			}
		case apierrors.IsConflict(err):
			// The cache was behind (see patchStatus): the newer version is
			// on its way; look again soon.
			ctrl.LoggerFrom(ctx).V(1).Info("SpaceRequest changed during reconcile, retrying", "error", err.Error())
			span.AddEvent("conflict")
			if retErr == nil {
				res = ctrl.Result{RequeueAfter: conflictRetry}
			}
		default:
			retErr = errors.Join(retErr, err)
		}
	}()

	if !sr.DeletionTimestamp.IsZero() {
		res, err := doReconcile(ctx, s, []phase{
			r.checkFinalizerPresent,
			r.markTerminating,
			r.deleteSecret,
			r.deleteNamespace,
			r.removeFinalizer,
		})
		if err != nil && !apierrors.IsConflict(err) {
			// A conflict only means the cache was behind: retry quietly.
			return r.terminationFailed(ctx, s, err), nil
		}
		return res, err
	}
	res, err := doReconcile(ctx, s, []phase{
		r.addFinalizer,
		r.markProvisioningStarted,
		r.checkClusterRole,
		r.applyNamespace,
		r.applyServiceAccount,
		r.applyRoleBinding,
		r.applyKubeconfigSecret,
		r.markProvisioned,
	})
	if err != nil && !apierrors.IsConflict(err) {
		// A conflict only means the cache was behind: retry quietly.
		r.setReady(sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, err.Error())
		r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, EventProvisioningFailed, "Provision", "%v", err)
	}
	return res, err
}

// doReconcile runs phases in order; it stops at the first error or at a
// phase that sets s.stop, and returns the soonest requeue asked for.
func doReconcile(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	var res ctrl.Result
	for _, p := range phases {
		r, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if r.RequeueAfter > 0 && (res.RequeueAfter == 0 || r.RequeueAfter < res.RequeueAfter) {
			res.RequeueAfter = r.RequeueAfter
		}
		if s.stop {
			break
		}
	}
	return res, nil
}

// patchStatus writes the status computed by this reconcile, if it changed.
// Only the stub writes SpaceRequest status. The write that turns the
// SpaceRequest Ready is preconditioned on its resourceVersion: from a stale
// cache (the stub's own Ready write not seen yet) it fails with a conflict
// instead of writing Ready again, so the provisioning duration it observes
// is observed exactly once.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope, before *toolchainv1alpha1.SpaceRequestStatus) error {
	sr := s.sr
	base := sr.DeepCopy()
	base.Status = *before
	turnsReady := !isReady(before) && isReady(&sr.Status)
	patch := client.MergeFrom(base)
	if turnsReady {
		patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	data, err := client.MergeFrom(base).Data(sr)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, "UpdateStatus", tracing.AttrPhase.String(readyReason(sr)))
	err = r.Client.Status().Patch(ctx, sr, patch)
	if apierrors.IsNotFound(err) {
		tracing.EndStep(span, nil)
		s.gone = true
		return nil
	}
	tracing.EndStep(span, err)
	if err != nil {
		return fmt.Errorf("patching status of SpaceRequest %s: %w", Key(sr), err)
	}
	r.superseded.Replaced(client.ObjectKeyFromObject(sr), base.ResourceVersion)
	if turnsReady && len(before.NamespaceAccess) == 0 {
		// First time Ready (a SpaceRequest that was Ready before keeps its
		// namespaceAccess while it recovers from a failure).
		observeProvisioned(sr.CreationTimestamp.Time)
	}
	return nil
}

func isReady(status *toolchainv1alpha1.SpaceRequestStatus) bool {
	return meta.IsStatusConditionTrue(status.Conditions, toolchainv1alpha1.ConditionReady)
}

func readyReasonOf(status *toolchainv1alpha1.SpaceRequestStatus) string {
	if c := meta.FindStatusCondition(status.Conditions, toolchainv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// setReady sets the Ready condition and the observed generation. Entering
// UnableToTerminate sets lastTransitionTime to now although the status stays
// False (meta.SetStatusCondition moves it only when the status changes): it
// is the contract (README) that it says when UnableToTerminate began, and the
// dt-binder shows it in the target's Terminating message. The binder's
// deadline for a SpaceRequest that cannot terminate does not count from it
// but from the SpaceRequest's deletionTimestamp (seed 004, step 5).
func (r *Reconciler) setReady(sr *toolchainv1alpha1.SpaceRequest, status metav1.ConditionStatus, reason, message string) {
	sr.Status.ObservedGeneration = sr.Generation
	enters := reason == toolchainv1alpha1.ReasonUnableToTerminate && readyReason(sr) != reason
	meta.SetStatusCondition(&sr.Status.Conditions, metav1.Condition{
		Type:               toolchainv1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: sr.Generation,
	})
	if enters {
		meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady).LastTransitionTime = metav1.NewTime(r.clock())
	}
}

func readyReason(sr *toolchainv1alpha1.SpaceRequest) string {
	return readyReasonOf(&sr.Status)
}

// patchFinalizers writes a finalizer change, failing on a concurrent change
// of the object so that no other writer's finalizer is lost.
// The write is the child span "SpaceRequest.<step>".
func (r *Reconciler) patchFinalizers(ctx context.Context, sr *toolchainv1alpha1.SpaceRequest, step string, mutate func(client.Object) bool) error {
	base := sr.DeepCopy()
	if !mutate(sr) {
		return nil
	}
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step)
	err := r.Client.Patch(ctx, sr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	tracing.EndStep(span, client.IgnoreNotFound(err))
	if err == nil {
		r.superseded.Replaced(client.ObjectKeyFromObject(sr), base.ResourceVersion)
	}
	return err
}

// apply is a server-side apply of the stub's field manager, as the child
// span "SpaceRequest.<step>".
func (r *Reconciler) apply(ctx context.Context, step, namespace string, obj runtime.ApplyConfiguration) error {
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step, attrNamespace.String(namespace))
	err := r.Client.Apply(ctx, obj, client.FieldOwner(FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	return err
}

// create creates obj with the stub's field manager, as the child span
// "SpaceRequest.<step>". Unlike an apply it fails (AlreadyExists) on an
// object that exists, so it never takes over one that Managed does not hold
// (someone else's, or the stub's own without its label or not cached yet).
// An AlreadyExists ends the span without an error: the caller decides.
func (r *Reconciler) create(ctx context.Context, step, namespace string, obj client.Object) error {
	ctx, span := tracing.StartStep(ctx, tracer(), Kind, step, attrNamespace.String(namespace))
	err := r.Client.Create(ctx, obj, client.FieldOwner(FieldManager))
	if apierrors.IsAlreadyExists(err) {
		span.AddEvent("already exists")
		tracing.EndStep(span, nil)
		return err
	}
	tracing.EndStep(span, err)
	return err
}

// readLive reads the metadata of an object that Managed does not hold (a
// create found it exists) from the API server. It exists, so NotFound only
// means it went in between: a conflict, retried quietly.
func (r *Reconciler) readLive(ctx context.Context, key client.ObjectKey, into *metav1.PartialObjectMetadata) error {
	err := r.APIReader.Get(ctx, key, into)
	if apierrors.IsNotFound(err) {
		return apierrors.NewConflict(schema.GroupResource{Resource: into.Kind}, key.Name,
			errors.New("it existed a moment ago and is gone now"))
	}
	return err
}

// --- provisioning phases ---

func (r *Reconciler) addFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	err := r.patchFinalizers(ctx, s.sr, "AddFinalizer", func(o client.Object) bool {
		return controllerutil.AddFinalizer(o, toolchainv1alpha1.Finalizer)
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) markProvisioningStarted(_ context.Context, s *scope) (ctrl.Result, error) {
	if meta.FindStatusCondition(s.sr.Status.Conditions, toolchainv1alpha1.ConditionReady) == nil {
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning,
			fmt.Sprintf("Creating namespace %s and its credentials", NamespaceName(s.sr)))
	}
	return ctrl.Result{}, nil
}

// checkClusterRole makes sure the edit ClusterRole grants something before
// handing out credentials bound to it. Its rules are aggregated by
// kube-controller-manager; on an API server without it (a bare envtest) the
// role exists but is empty, and a kubeconfig bound to it could do nothing.
func (r *Reconciler) checkClusterRole(ctx context.Context, s *scope) (ctrl.Result, error) {
	role := &rbacv1.ClusterRole{}
	err := r.RoleReader.Get(ctx, client.ObjectKey{Name: EditClusterRole}, role)
	var msg string
	switch {
	case apierrors.IsNotFound(err):
		msg = fmt.Sprintf("ClusterRole %s does not exist", EditClusterRole)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading ClusterRole %s: %w", EditClusterRole, err)
	case len(role.Rules) == 0:
		msg = fmt.Sprintf("ClusterRole %s grants no permissions yet (kube-controller-manager aggregates its rules); waiting", EditClusterRole)
	default:
		return ctrl.Result{}, nil
	}
	if !conditionMessageIs(s.sr, msg) {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventClusterRoleNotReady, "Provision", "%s", msg)
	}
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
	s.stop = true
	return ctrl.Result{RequeueAfter: clusterRoleRetry}, nil
}

func (r *Reconciler) applyNamespace(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := NamespaceName(s.sr)
	existing := metadataOf(namespaceGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Name: name}, existing)
	// live: existing was read from the API server, not from Managed.
	live := false
	if apierrors.IsNotFound(err) {
		if _, left, ok := r.unseen.pending(namespaceKey(name), r.clock()); ok {
			// Created by the stub moments ago, with all it applies; Managed
			// has not shown it yet, and its event brings the next reconcile.
			return ctrl.Result{RequeueAfter: left}, nil
		}
		// Not the stub's, or not labelled, or not cached yet: create it, and
		// if it exists, look at it on the API server.
		created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{ManagedByLabel: ManagedByValue},
			Annotations: map[string]string{SpaceRequestAnnotation: Key(s.sr)},
		}}
		err = r.create(ctx, "ApplyNamespace", name, created)
		if err == nil {
			r.unseen.created(namespaceKey(name), created, r.clock())
			log.Info("created namespace", "namespace", name)
			if s.wasReady {
				r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventNamespaceCreated, "Provision", "Created namespace %s", name)
			}
			return ctrl.Result{}, nil
		}
		if apierrors.IsAlreadyExists(err) {
			err, live = r.readLive(ctx, client.ObjectKey{Name: name}, existing), true
		}
	}
	switch {
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", name, err)
	case existing.Annotations[SpaceRequestAnnotation] != Key(s.sr):
		// Never take over a namespace someone else made.
		msg := fmt.Sprintf("Namespace %s already exists and was not created for this SpaceRequest", name)
		if readyReason(s.sr) != toolchainv1alpha1.ReasonProvisioning || !conditionMessageIs(s.sr, msg) {
			r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventNamespaceNotOwned, "Provision", "%s", msg)
		}
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
		log.Info("namespace exists and belongs to something else", "namespace", name,
			"owner", existing.Annotations[SpaceRequestAnnotation])
		s.stop = true
		return ctrl.Result{RequeueAfter: foreignNamespaceRetry}, nil
	case !existing.DeletionTimestamp.IsZero():
		// Left over from an earlier SpaceRequest of the same name: wait for
		// it to go; its deletion event brings the stub back here if Managed
		// holds it. One read from the API server (it lost the stub's label)
		// goes without an event: look again, with a bounded back-off.
		msg := fmt.Sprintf("Namespace %s is still terminating from an earlier SpaceRequest; waiting for it to go", name)
		if !conditionMessageIs(s.sr, msg) {
			r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventNamespaceTerminating, "Provision", "%s", msg)
		}
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
		s.stop = true
		if live {
			return ctrl.Result{RequeueAfter: backoff(r.clock().Sub(existing.DeletionTimestamp.Time))}, nil
		}
		return ctrl.Result{}, nil
	case existing.Labels[ManagedByLabel] == ManagedByValue:
		// Labels and annotations are all the stub applies: nothing to do.
		return ctrl.Result{}, nil
	}

	// The stub's, without its label (removed by someone): label it again.
	ns := corev1ac.Namespace(name).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)})
	if err := r.apply(ctx, "ApplyNamespace", name, ns); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying namespace %s: %w", name, err)
	}
	return ctrl.Result{}, nil
}

func conditionMessageIs(sr *toolchainv1alpha1.SpaceRequest, msg string) bool {
	c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	return c != nil && c.Message == msg
}

func (r *Reconciler) applyServiceAccount(ctx context.Context, s *scope) (ctrl.Result, error) {
	ns := NamespaceName(s.sr)
	// The namespace is the stub's (applyNamespace): a ServiceAccount of this
	// name in it that Managed does not hold (unlabelled) is applied over, as
	// one that does but lacks the stub's metadata. Only who has rights in the
	// namespace could have made it, and those rights come from the stub.
	existing := metadataOf(serviceAccountGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: ns, Name: ServiceAccountName}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	case existing.DeletionTimestamp.IsZero() && existing.UID != "" &&
		existing.Labels[ManagedByLabel] == ManagedByValue && existing.Annotations[SpaceRequestAnnotation] == Key(s.sr):
		// Labels and annotations are all the stub applies: nothing to do.
		s.serviceAccountUID = existing.UID
		return ctrl.Result{}, nil
	}
	sa := corev1ac.ServiceAccount(ServiceAccountName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)})
	if err := r.apply(ctx, "ApplyServiceAccount", ns, sa); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	s.serviceAccountUID = ptr.Deref(sa.UID, "")
	if s.serviceAccountUID == "" {
		return ctrl.Result{}, fmt.Errorf("applying ServiceAccount %s/%s: the API server returned no UID", ns, ServiceAccountName)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) applyRoleBinding(ctx context.Context, s *scope) (ctrl.Result, error) {
	ns := NamespaceName(s.sr)
	// In the stub's namespace, like the ServiceAccount: one that Managed does
	// not hold is applied over.
	existing := metadataOf(roleBindingGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: ns, Name: RoleBindingName}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading RoleBinding %s/%s: %w", ns, RoleBindingName, err)
	case existing.DeletionTimestamp.IsZero() && r.isKnown(roleBindingKey(ns), existing.ResourceVersion):
		// Unchanged since the stub applied it.
		return ctrl.Result{}, nil
	}
	rb := rbacv1ac.RoleBinding(RoleBindingName, ns).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)}).
		WithRoleRef(rbacv1ac.RoleRef().
			WithAPIGroup(rbacv1.GroupName).
			WithKind("ClusterRole").
			WithName(EditClusterRole)).
		WithSubjects(rbacv1ac.Subject().
			WithKind(rbacv1.ServiceAccountKind).
			WithName(ServiceAccountName).
			WithNamespace(ns))
	if err := r.apply(ctx, "ApplyRoleBinding", ns, rb); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying RoleBinding %s/%s: %w", ns, RoleBindingName, err)
	}
	r.remember(roleBindingKey(ns), ptr.Deref(rb.ResourceVersion, ""))
	return ctrl.Result{}, nil
}

// applyKubeconfigSecret writes the kubeconfig Secret, with a new token when
// there is none yet, when it is due for refresh, or when anything it was
// built from changed. Otherwise it only schedules the next refresh.
func (r *Reconciler) applyKubeconfigSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	ns := NamespaceName(s.sr)
	name := SecretName(s.sr)
	credHash := hashOf(r.TargetClusterURL, string(r.CAData), fmt.Sprint(r.Insecure), ns, ServiceAccountName, string(s.serviceAccountUID))
	now := r.clock()

	// The cache holds the Secret's metadata only. A copy at the
	// resourceVersion the stub last wrote (or read in full) holds the
	// kubeconfig the stub wrote; any other needs a look at its data. The
	// cache holds only Secrets with the stub's label: one it does not hold
	// is missing or someone else's, or one the stub created moments ago
	// that the cache has not shown yet (unseen: what the stub wrote is
	// known). It is read, too, if the stub wrote it (then it lost its
	// label, or is not cached yet after an apply) or found it was someone
	// else's (so that a retry requests no token while it stays so).
	key := secretKey(s.sr.Namespace, name)
	cached := metadataOf(secretGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, cached)
	var known, unseen *metav1.ObjectMeta
	var unseenLeft time.Duration
	if apierrors.IsNotFound(err) {
		unseen, unseenLeft, _ = r.unseen.pending(key, now)
	}
	hasData := false
	switch {
	case unseen != nil:
		known, hasData = unseen, true
	case apierrors.IsNotFound(err) && !r.tracked(key):
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
	case err == nil && r.isKnown(key, cached.ResourceVersion):
		known, hasData = &cached.ObjectMeta, true
	default:
		existing := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, existing)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
		default:
			known, hasData = &existing.ObjectMeta, len(existing.Data[toolchainv1alpha1.AdminKubeconfigKey]) > 0
		}
	}
	if known != nil {
		if known.Annotations[SpaceRequestAnnotation] != Key(s.sr) {
			return ctrl.Result{}, fmt.Errorf("secret %s/%s exists and was not created for this SpaceRequest", s.sr.Namespace, name)
		}
		refreshAt, perr := time.Parse(time.RFC3339, known.Annotations[TokenRefreshAtAnnotation])
		// One that lost the stub's label (read from the API server) is
		// written again, so that the cache holds (and watches) it again.
		if perr == nil && now.Before(refreshAt) && known.Annotations[CredentialsHashAnnotation] == credHash && hasData &&
			known.Labels[ManagedByLabel] == ManagedByValue {
			r.remember(key, known.ResourceVersion)
			requeue := refreshAt.Sub(now)
			if unseen != nil {
				// Its event brings the next reconcile; should none come,
				// look again when the record is no longer trusted.
				requeue = min(requeue, unseenLeft)
			}
			return ctrl.Result{RequeueAfter: requeue}, nil
		}
	}

	ctx, span := tracing.StartStep(ctx, tracer(), Kind, "IssueCredentials", attrNamespace.String(ns))
	// A Secret not known to be the stub's is created, not applied: the
	// create fails on one that exists, which is never taken over.
	res, err := r.issueCredentials(ctx, s, ns, name, credHash, now, known == nil)
	tracing.EndStep(span, err)
	return res, err
}

// issueCredentials requests a token for the namespace's ServiceAccount and
// writes the kubeconfig Secret: an apply of the stub's own Secret, or, when
// create is set (no Secret of the stub's was found), a create, which fails on
// a Secret that exists: one not made for this SpaceRequest is an error, the
// stub's own (not cached yet, or its label removed) is applied after all.
func (r *Reconciler) issueCredentials(ctx context.Context, s *scope, ns, name, credHash string, now time.Time, create bool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	tr := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(r.TokenExpiration / time.Second))},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ServiceAccountName}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return ctrl.Result{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	lifetime := expires.Sub(now)
	if lifetime <= 0 {
		return ctrl.Result{}, fmt.Errorf("the token issued for ServiceAccount %s/%s already expired at %s", ns, ServiceAccountName, expires)
	}
	refreshAt := now.Add(lifetime * 4 / 5)

	kubeconfig, err := r.kubeconfig(ns, tr.Status.Token)
	if err != nil {
		return ctrl.Result{}, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.sr.Namespace,
			Name:      name,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue},
			Annotations: map[string]string{
				SpaceRequestAnnotation:    Key(s.sr),
				TokenRefreshAtAnnotation:  refreshAt.UTC().Format(time.RFC3339),
				TokenExpiresAtAnnotation:  expires.UTC().Format(time.RFC3339),
				CredentialsHashAnnotation: credHash,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.sr, toolchainv1alpha1.SchemeGroupVersion.WithKind("SpaceRequest"))},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{toolchainv1alpha1.AdminKubeconfigKey: kubeconfig},
	}
	rv, err := r.writeSecret(ctx, s, secret, create)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.remember(secretKey(s.sr.Namespace, name), rv)
	log.Info("issued kubeconfig", "secret", name, "namespace", ns, "tokenExpiresAt", expires, "refreshAt", refreshAt)
	if !s.wasReady {
		// First provisioning: the Provisioned event follows.
		return ctrl.Result{RequeueAfter: refreshAt.Sub(now)}, nil
	}
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventCredentialsIssued, "Provision",
		"Issued a kubeconfig for namespace %s in Secret %s (token expires %s)", ns, name, expires.UTC().Format(time.RFC3339))
	return ctrl.Result{RequeueAfter: refreshAt.Sub(now)}, nil
}

// writeSecret creates (create set) or applies the kubeconfig Secret and
// returns the resourceVersion written. A create that finds a Secret of the
// name looks at it: someone else's is an error, the stub's own is applied.
func (r *Reconciler) writeSecret(ctx context.Context, s *scope, secret *corev1.Secret, create bool) (string, error) {
	key := client.ObjectKeyFromObject(secret)
	if create {
		created := secret.DeepCopy()
		err := r.Client.Create(ctx, created, client.FieldOwner(FieldManager))
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return "", fmt.Errorf("creating Secret %s: %w", key, err)
			}
			r.unseen.created(secretKey(key.Namespace, key.Name), created, r.clock())
			return created.ResourceVersion, nil
		}
		existing := metadataOf(secretGVK)
		if err := r.readLive(ctx, key, existing); err != nil {
			return "", fmt.Errorf("reading Secret %s: %w", key, err)
		}
		if existing.Annotations[SpaceRequestAnnotation] != Key(s.sr) {
			r.written.Store(secretKey(key.Namespace, key.Name), "")
			return "", fmt.Errorf("secret %s exists and was not created for this SpaceRequest", key)
		}
	}
	owner := secret.OwnerReferences[0]
	ac := corev1ac.Secret(secret.Name, secret.Namespace).
		WithType(secret.Type).
		WithLabels(secret.Labels).
		WithAnnotations(secret.Annotations).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(owner.APIVersion).
			WithKind(owner.Kind).
			WithName(owner.Name).
			WithUID(owner.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithData(secret.Data)
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying Secret %s: %w", key, err)
	}
	return ptr.Deref(ac.ResourceVersion, ""), nil
}

// kubeconfig builds a kubeconfig for the namespace's ServiceAccount.
func (r *Reconciler) kubeconfig(namespace, token string) ([]byte, error) {
	const name = "spacerequest"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   r.TargetClusterURL,
		CertificateAuthorityData: r.CAData,
		InsecureSkipTLSVerify:    r.Insecure,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return data, nil
}

func (r *Reconciler) markProvisioned(ctx context.Context, s *scope) (ctrl.Result, error) {
	ns := NamespaceName(s.sr)
	s.sr.Status.TargetClusterURL = r.TargetClusterURL
	s.sr.Status.NamespaceAccess = []toolchainv1alpha1.NamespaceAccess{{Name: ns, SecretRef: SecretName(s.sr)}}
	wasReady := meta.IsStatusConditionTrue(s.sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	r.setReady(s.sr, metav1.ConditionTrue, toolchainv1alpha1.ReasonProvisioned,
		fmt.Sprintf("Namespace %s is ready; Secret %s holds a kubeconfig with edit rights in it", ns, SecretName(s.sr)))
	if !wasReady {
		ctrl.LoggerFrom(ctx).Info("provisioned", "namespace", ns, "secret", SecretName(s.sr))
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventProvisioned, "Provision",
			"Namespace %s is ready; Secret %s holds its kubeconfig", ns, SecretName(s.sr))
	}
	return ctrl.Result{}, nil
}

// --- deletion phases ---

func (r *Reconciler) checkFinalizerPresent(_ context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.sr, toolchainv1alpha1.Finalizer) {
		// Not (or no longer) the stub's to clean up.
		s.stop, s.skipStatus = true, true
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) markTerminating(ctx context.Context, s *scope) (ctrl.Result, error) {
	switch readyReason(s.sr) {
	case toolchainv1alpha1.ReasonTerminating, toolchainv1alpha1.ReasonUnableToTerminate:
		return ctrl.Result{}, nil
	}
	ns := NamespaceName(s.sr)
	ctrl.LoggerFrom(ctx).Info("terminating", "namespace", ns)
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonTerminating, terminatingMessage(s.sr))
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventTerminating, "Terminate", "%s", terminatingMessage(s.sr))
	return ctrl.Result{}, nil
}

func terminatingMessage(sr *toolchainv1alpha1.SpaceRequest) string {
	return fmt.Sprintf("Deleting namespace %s and Secret %s", NamespaceName(sr), SecretName(sr))
}

func unableToTerminateMessage(sr *toolchainv1alpha1.SpaceRequest, timeout time.Duration) string {
	return fmt.Sprintf("Namespace %s is still there %s after the SpaceRequest was deleted", NamespaceName(sr), timeout)
}

// namespaceHoldUps are the conditions kube-controller-manager's namespace
// controller sets (status True) on a terminating namespace it cannot empty
// or finish: their messages say what is left and which finalizers hold it,
// which the stub cannot know from the namespace's metadata.
var namespaceHoldUps = []corev1.NamespaceConditionType{
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
}

// maxQuotedNamespaceStatus bounds what UnableToTerminate quotes from the
// namespace's conditions (their messages list every resource and finalizer
// left): the message also goes into an event, whose note the API server
// refuses beyond 1 KiB.
const maxQuotedNamespaceStatus = 640

// stuckNamespaceMessage is UnableToTerminate's message for a namespace that
// is still there, quoting what its own conditions say holds it up.
func stuckNamespaceMessage(sr *toolchainv1alpha1.SpaceRequest, timeout time.Duration, ns *corev1.Namespace) string {
	msg := unableToTerminateMessage(sr, timeout)
	var quoted []string
	for _, t := range namespaceHoldUps {
		for _, c := range ns.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue && c.Message != "" {
				quoted = append(quoted, fmt.Sprintf("%s: %s", c.Type, c.Message))
			}
		}
	}
	if len(quoted) == 0 {
		return msg
	}
	return msg + "; its status says: " + text.Shorten(strings.Join(quoted, "; "), maxQuotedNamespaceStatus)
}

// terminationFailed reports a deletion step that failed: the error goes into
// the Ready condition's message and a Warning event (once per change of the
// message), the reason is Terminating or, once the termination timeout has
// passed, UnableToTerminate: wherever deletion is stuck, a consumer waiting
// for UnableToTerminate (the dt-binder) sees it. The step is retried with a
// bounded back-off that looks again exactly when the timeout passes (an
// error returned to controller-runtime would back off past it).
func (r *Reconciler) terminationFailed(ctx context.Context, s *scope, err error) ctrl.Result {
	s.failed = err
	elapsed := r.clock().Sub(s.sr.DeletionTimestamp.Time)
	reason, event := toolchainv1alpha1.ReasonTerminating, EventTerminationFailed
	msg := fmt.Sprintf("%s failed, retrying: %v", terminatingMessage(s.sr), err)
	if elapsed >= r.TerminationTimeout {
		reason, event = toolchainv1alpha1.ReasonUnableToTerminate, EventUnableToTerminate
		msg = fmt.Sprintf("%s; deleting it failed, retrying: %v", unableToTerminateMessage(s.sr, r.TerminationTimeout), err)
	}
	retry := r.deletionRetry(elapsed)
	ctrl.LoggerFrom(ctx).Error(err, "deletion step failed", "namespace", NamespaceName(s.sr), "reason", reason, "retryAfter", retry)
	if readyReason(s.sr) != reason || !conditionMessageIs(s.sr, msg) {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, event, "Terminate", "%s", msg)
	}
	r.setReady(s.sr, metav1.ConditionFalse, reason, msg)
	return ctrl.Result{RequeueAfter: retry}
}

// deletionRetry is how soon a deleted SpaceRequest is looked at again when
// no event will bring it back: a quarter of the time since its deletion,
// within [minDeletionRetry, maxDeletionRetry], and no later than the
// termination timeout.
func (r *Reconciler) deletionRetry(elapsed time.Duration) time.Duration {
	d := backoff(elapsed)
	if left := r.TerminationTimeout - elapsed; left > 0 && left < d {
		d = left
	}
	return d
}

// backoff grows with the time something has been waiting for, within
// [minDeletionRetry, maxDeletionRetry]; it needs no state of its own.
func backoff(elapsed time.Duration) time.Duration {
	return min(max(elapsed/4, minDeletionRetry), maxDeletionRetry)
}

func (r *Reconciler) deleteSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	name := SecretName(s.sr)
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) || (err == nil && secret.Annotations[SpaceRequestAnnotation] != Key(s.sr)) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
	}
	spanCtx, span := tracing.StartStep(ctx, tracer(), Kind, "DeleteSecret")
	err = client.IgnoreNotFound(r.Client.Delete(spanCtx, secret, client.Preconditions{UID: &secret.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting Secret %s/%s: %w", s.sr.Namespace, name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted kubeconfig Secret", "secret", name)
	return ctrl.Result{}, nil
}

// deleteNamespace deletes the namespace and waits for it to go; after the
// termination timeout it reports UnableToTerminate and keeps waiting. The
// namespace's deletion event brings the stub back, so nothing polls.
func (r *Reconciler) deleteNamespace(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := NamespaceName(s.sr)
	// Read in full, not as metadata (the same one request): once the
	// termination timeout passes, the namespace's status conditions say
	// what holds it up (see stuckNamespaceMessage).
	ns := &corev1.Namespace{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) || (err == nil && ns.Annotations[SpaceRequestAnnotation] != Key(s.sr)) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp.IsZero() {
		spanCtx, span := tracing.StartStep(ctx, tracer(), Kind, "DeleteNamespace", attrNamespace.String(name))
		err := client.IgnoreNotFound(r.Client.Delete(spanCtx, ns, client.Preconditions{UID: &ns.UID}))
		tracing.EndStep(span, err)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting namespace %s: %w", name, err)
		}
		r.deletedNamespaces.deleted(name, ns.UID)
		log.Info("deleting namespace", "namespace", name)
	}

	s.stop = true
	elapsed := r.clock().Sub(s.sr.DeletionTimestamp.Time)
	var res ctrl.Result
	if elapsed < r.TerminationTimeout {
		// Also replaces the message of a step that failed before.
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonTerminating, terminatingMessage(s.sr))
		res.RequeueAfter = r.TerminationTimeout - elapsed
	} else {
		// A change of the namespace's conditions (a status write) is a
		// watch event of Managed too: the message follows them.
		msg := stuckNamespaceMessage(s.sr, r.TerminationTimeout, ns)
		if readyReason(s.sr) != toolchainv1alpha1.ReasonUnableToTerminate || !conditionMessageIs(s.sr, msg) {
			log.Info("unable to terminate", "namespace", name, "timeout", r.TerminationTimeout, "message", msg)
			r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventUnableToTerminate, "Terminate", "%s", msg)
		}
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonUnableToTerminate, msg)
	}
	// The namespace's deletion event brings the stub back only if Managed
	// holds it: one that lost the stub's label (read above from the API
	// server) goes without an event, so look again (bounded back-off).
	// Managed is a cache: this costs no request.
	if err := r.Managed.Get(ctx, client.ObjectKey{Name: name}, metadataOf(namespaceGVK)); apierrors.IsNotFound(err) {
		retry := r.deletionRetry(elapsed)
		if res.RequeueAfter == 0 || retry < res.RequeueAfter {
			res.RequeueAfter = retry
		}
		log.V(1).Info("namespace is not in the stub's cache, no event will say it is gone; looking again", "namespace", name, "retryAfter", retry)
	}
	return res, nil
}

// deleteOrphanedNamespace deletes the namespace provisioned for a SpaceRequest
// that is gone without the stub having cleaned up (its finalizer was removed
// by hand): otherwise the namespace, its ServiceAccount and RoleBinding, and
// the tokens handed out for it, would outlive it. (Deleting the namespace
// deletes the ServiceAccount, which invalidates its tokens; the kubeconfig
// Secret has an owner reference to the SpaceRequest, so the garbage
// collector deletes it.) It costs no request on the normal path: the stub
// removes its finalizer only once the namespace is gone, so Managed holds no
// such namespace, or holds it terminating. Only a namespace of the stub's
// (in Managed, so labelled) whose annotation names the SpaceRequest is
// deleted, after the API server confirmed that the SpaceRequest is gone (the
// manager's cache may be behind one created again), with a UID
// precondition.
func (r *Reconciler) deleteOrphanedNamespace(ctx context.Context, key types.NamespacedName) error {
	gone := &toolchainv1alpha1.SpaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	name := NamespaceName(gone)
	cached := metadataOf(namespaceGVK)
	if err := r.Managed.Get(ctx, client.ObjectKey{Name: name}, cached); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cached.Annotations[SpaceRequestAnnotation] != Key(gone) || !cached.DeletionTimestamp.IsZero() ||
		r.deletedNamespaces.has(name, cached.UID) {
		// Not the SpaceRequest's, or already on its way out: deleted by
		// the stub itself when it terminated the SpaceRequest, even if
		// Managed does not show that yet.
		return nil
	}
	// The stub's RBAC lists SpaceRequests (it has no get): a list of the one
	// name, from the API server.
	list := &toolchainv1alpha1.SpaceRequestList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name}); err != nil {
		return fmt.Errorf("confirming that SpaceRequest %s is gone: %w", key, err)
	}
	if len(list.Items) > 0 {
		// It exists: its own watch event brings the reconcile that serves it.
		return nil
	}
	ns := metadataOf(namespaceGVK)
	ns.Name, ns.UID = name, cached.UID
	if err := r.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone already: Managed was behind; nothing was left behind.
			return nil
		}
		return fmt.Errorf("deleting namespace %s of SpaceRequest %s, which is gone: %w", name, key, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted the namespace of a SpaceRequest that is gone without being cleaned up (its finalizer was removed)",
		"namespace", name, "uid", ns.UID)
	r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, EventOrphanedNamespaceDeleted, "Terminate",
		"SpaceRequest %s is gone without being cleaned up (its finalizer was removed); deleted its namespace %s", key, name)
	return nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	err := r.patchFinalizers(ctx, s.sr, "RemoveFinalizer", func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, toolchainv1alpha1.Finalizer)
	})
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	s.skipStatus, s.gone = true, true
	ctrl.LoggerFrom(ctx).Info("terminated", "namespace", NamespaceName(s.sr))
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventTerminated, "Terminate",
		"Namespace %s is gone; released the SpaceRequest", NamespaceName(s.sr))
	return ctrl.Result{}, nil
}
