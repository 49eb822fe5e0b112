// Package claim provisions for DeploymentTargetClaims the binder marked for
// appstudio.redhat.com/devsandbox: first one SpaceRequest, then, once the
// SpaceRequest is Ready, the DeploymentTarget pointing at what it provisioned.
// The binder then binds the two; this reconciler never writes claim or target
// status.
package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/setup"
	"github.com/terrace-dev/terrace/kit/timeout"
	"github.com/terrace-dev/terrace/kit/tracing"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// DefaultTierName is the SpaceRequest tier used when the class's parameters
// name none.
const DefaultTierName = "appstudio-env"

// Event reasons (on the claim): problems only. Creating the SpaceRequest and
// the target is logged and traced; the binder's Bound event on the claim is
// the outcome. ClassNotFound, InvalidClassParameters and the SpaceRequest
// warnings are recorded once per distinct message while the claim waits
// (claimWarnings), not on every reconcile.
const (
	EventClassNotFound           = "ClassNotFound"
	EventInvalidParameters       = "InvalidClassParameters"
	EventCredentialsSecretAbsent = "CredentialsSecretMissing"
	// EventSpaceRequestNotReady: the claim's SpaceRequest reports a reason
	// it is not Ready other than provisioning in progress, or is still not
	// Ready when the warning delay is over; the note quotes its condition.
	EventSpaceRequestNotReady = "SpaceRequestNotReady"
	// EventSpaceRequestUnanswered: the claim's SpaceRequest still has no
	// Ready condition when the warning delay is over: no SpaceRequest
	// controller handles it.
	EventSpaceRequestUnanswered = "SpaceRequestUnanswered"
	// EventProvisioningFailed: a reconcile failed with an error (creating
	// the SpaceRequest or the target, reading what it needs); it is retried
	// with back-off.
	EventProvisioningFailed = "ProvisioningFailed"
)

// Parameters are the DeploymentTargetClass parameters this provisioner reads.
// Unknown parameters are ignored.
type Parameters struct {
	// TierName is the SpaceRequest's spec.tierName.
	TierName string `json:"tierName,omitempty"`
	// TargetClusterRoles is the SpaceRequest's spec.targetClusterRoles.
	TargetClusterRoles []string `json:"targetClusterRoles,omitempty"`
}

// RBAC of this reconciler (least privilege), collected into the binary's
// ClusterRole by controller-gen (make generate):
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargetclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=appstudio.redhat.com,resources=deploymenttargets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=toolchain.dev.openshift.com,resources=spacerequests,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler provisions for sandbox claims.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the credentials Secret directly (no Secret cache).
	APIReader client.Reader
	// Recorder records events on claims.
	Recorder events.EventRecorder

	// outcomes ends each reconcile and counts conflicts in a row per object
	// (flow.Outcomes).
	outcomes flow.Outcomes
	// DefaultTierName is the tier of SpaceRequests whose class names none.
	DefaultTierName string
	// SpaceRequestWarning is how long a SpaceRequest may show provisioning
	// in progress (no Ready condition, or reason Provisioning) before a
	// Warning on its claim says so; zero means DefaultSpaceRequestWarning.
	SpaceRequestWarning timeout.Timeout
	// Now is the clock of the SpaceRequest warnings; nil means time.Now.
	Now func() time.Time

	// warnings makes the claim's Warnings once per distinct message.
	warnings claimWarnings

	// created remembers the SpaceRequests and targets this process created
	// and its cache does not show yet, so that a reconcile from a stale
	// cache waits for their watch events instead of writing them again.
	created createdObjects
}

// createdWait is how long a created object the cache does not show yet is
// waited for before it is written again (it may have been deleted before
// the cache ever saw it).
const createdWait = 30 * time.Second

// createdObjects is safe for concurrent use; the zero value is ready.
type createdObjects struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func createdKey(kind string, key client.ObjectKey) string { return kind + "/" + key.String() }

func (c *createdObjects) add(kind string, key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]time.Time{}
	}
	c.m[createdKey(kind, key)] = time.Now()
}

// pending returns how much longer to wait for the cache to show an object
// this process created; zero when there is nothing to wait for.
func (c *createdObjects) pending(kind string, key client.ObjectKey) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[createdKey(kind, key)]
	if !ok {
		return 0
	}
	if left := createdWait - time.Since(at); left > 0 {
		return left
	}
	delete(c.m, createdKey(kind, key))
	return 0
}

// seen drops the record of an object the cache shows.
func (c *createdObjects) seen(kind string, key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, createdKey(kind, key))
}

// SetupWithManager checks the reconciler's settings and registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setup.Check("claim", setup.Required("Client", r.Client), setup.Required("APIReader", r.APIReader),
		setup.Required("Recorder", r.Recorder), setup.Required("DefaultTierName", r.DefaultTierName)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("claim").
		For(&appstudiov1alpha1.DeploymentTargetClaim{},
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return sandbox.WantsSandbox(o) }))).
		// The SpaceRequest becoming Ready, or going away.
		Watches(&toolchainv1alpha1.SpaceRequest{}, handler.EnqueueRequestsFromMapFunc(spaceRequestToClaim)).
		// The target being created or deleted.
		Watches(&appstudiov1alpha1.DeploymentTarget{}, handler.EnqueueRequestsFromMapFunc(targetToClaim)).
		// A class appearing (claims waiting for it) or changing.
		Watches(&appstudiov1alpha1.DeploymentTargetClass{}, handler.EnqueueRequestsFromMapFunc(r.classToClaims)).
		Complete(r)
}

func spaceRequestToClaim(_ context.Context, o client.Object) []reconcile.Request {
	name := appstudiov1alpha1.ClaimOf(o)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func targetToClaim(_ context.Context, o client.Object) []reconcile.Request {
	dt, ok := o.(*appstudiov1alpha1.DeploymentTarget)
	if !ok || !sandbox.ProvisionedBySandbox(dt) || dt.Spec.ClaimRef == nil || dt.Spec.ClaimRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: dt.Namespace, Name: dt.Spec.ClaimRef.Name}}}
}

func (r *Reconciler) classToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &appstudiov1alpha1.DeploymentTargetClaimList{}
	if err := r.Client.List(ctx, claims); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims for a class change", "class", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.DeploymentTargetClassName == o.GetName() && sandbox.WantsSandbox(c) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// scope is the state of one reconcile.
type scope struct {
	claim  *appstudiov1alpha1.DeploymentTargetClaim
	class  *appstudiov1alpha1.DeploymentTargetClass
	params Parameters
	sr     *toolchainv1alpha1.SpaceRequest
	// reported: the error the steps return was already reported in an event.
	reported bool
}

// Reconcile provisions the claim's SpaceRequest and target. The reconcile is
// the span "DeploymentTargetClaim.Reconcile", continuing the trace the binder
// handed over in the claim's trace-context annotation; the SpaceRequest and
// the target are created carrying the trace on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	claim := &appstudiov1alpha1.DeploymentTargetClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.outcomes.Forget(req.NamespacedName)
			r.warnings.forget(req.NamespacedName)
		}
		// A deleted claim's SpaceRequest is the orphan reconciler's business.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx, span := tracing.StartReconcile(ctx, sandbox.Tracer(), sandbox.KindClaim, claim, "")
	defer func() { tracing.EndReconcile(span, string(claim.Status.Phase), retErr) }()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("spaceRequest", sandbox.ObjectName(claim)))
	s := &scope{claim: claim}
	res, err := flow.Run(ctx, s,
		r.checkWanted,
		r.checkTarget,
		r.loadClass,
		r.applySpaceRequest,
		r.waitForSpaceRequest,
		r.checkCredentialsSecret,
		r.createTarget,
	)
	return r.outcomes.Finish(ctx, req.NamespacedName, res, err, func(err error) {
		if !s.reported {
			r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, EventProvisioningFailed, "Provision", "%v", err)
		}
	})
}

// waitForCreated stops the reconcile when the cache does not show yet an
// object this process created: its watch event brings the claim back.
func (r *Reconciler) waitForCreated(ctx context.Context, kind string, key client.ObjectKey) (flow.Result, bool) {
	left := r.created.pending(kind, key)
	if left == 0 {
		return flow.Continue(), false
	}
	ctrl.LoggerFrom(ctx).V(1).Info("waiting for the cache to show what this provisioner created", "kind", kind, "name", key.Name)
	return flow.Stop().RequeueAfter(left), true
}

// checkWanted stops unless the claim still waits for a sandbox target: marked
// for this provisioner, not being deleted, not naming another target in
// spec.targetName, not bound, not lost (a lost claim is not re-provisioned:
// its target was deleted on purpose).
func (r *Reconciler) checkWanted(ctx context.Context, s *scope) (flow.Result, error) {
	c := s.claim
	var why string
	switch {
	case !sandbox.WantsSandbox(c):
		why = "not marked for " + appstudiov1alpha1.SandboxProvisioner
	case !c.DeletionTimestamp.IsZero():
		why = "being deleted"
	case sandbox.NamesOtherTarget(c):
		// The binder binds such a claim statically, to that target only:
		// a target provisioned now would never be bound (or, held by the
		// claim, would block the static binding), and its SpaceRequest
		// would hold a namespace for nothing. The orphan reconciler deletes
		// a SpaceRequest made before spec.targetName was set.
		why = "spec.targetName names another target"
	case c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseBound,
		c.Annotations[appstudiov1alpha1.BindCompleteAnnotation] == appstudiov1alpha1.AnnotationTrue:
		why = "bound"
	case c.Status.Phase == appstudiov1alpha1.DeploymentTargetClaimPhaseLost:
		why = "lost"
	default:
		return flow.Continue(), nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("nothing to provision", "reason", why)
	// It no longer waits: what it was told is history.
	r.warnings.forget(client.ObjectKeyFromObject(c))
	return flow.Stop(), nil
}

func (r *Reconciler) loadClass(ctx context.Context, s *scope) (flow.Result, error) {
	name := s.claim.Spec.DeploymentTargetClassName
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			// The class watch brings the claim back when the class appears.
			note := fmt.Sprintf("DeploymentTargetClass %s does not exist; waiting for it", name)
			if r.warnOnce(s, topicClass, note, nil, EventClassNotFound, note) {
				ctrl.LoggerFrom(ctx).Info("waiting for the claim's class", "class", name)
			}
			return flow.Stop(), nil
		}
		return flow.Continue(), fmt.Errorf("reading DeploymentTargetClass %s: %w", name, err)
	}
	s.class = class
	if class.Spec.Parameters != nil && len(class.Spec.Parameters.Raw) > 0 {
		if err := json.Unmarshal(class.Spec.Parameters.Raw, &s.params); err != nil {
			// The class watch brings the claim back when it is fixed.
			note := fmt.Sprintf("Parameters of DeploymentTargetClass %s are invalid: %v", name, err)
			if r.warnOnce(s, topicClass, note, class, EventInvalidParameters, note) {
				ctrl.LoggerFrom(ctx).Info("invalid class parameters", "class", name, "error", err.Error())
			}
			return flow.Stop(), nil
		}
	}
	// The class is usable: a problem with it that comes back is new.
	r.warnings.clear(client.ObjectKeyFromObject(s.claim), topicClass)
	if s.params.TierName == "" {
		s.params.TierName = r.DefaultTierName
	}
	return flow.Continue(), nil
}

// applySpaceRequest creates the claim's one SpaceRequest unless it exists.
func (r *Reconciler) applySpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	sr := &toolchainv1alpha1.SpaceRequest{}
	key := client.ObjectKey{Namespace: s.claim.Namespace, Name: name}
	err := r.Client.Get(ctx, key, sr)
	switch {
	case err == nil:
		r.created.seen(sandbox.KindSpaceRequest, key)
		s.sr = sr
		if !sr.DeletionTimestamp.IsZero() {
			// Its deletion event brings the claim back; then a new one is made.
			ctrl.LoggerFrom(ctx).Info("waiting for the previous SpaceRequest to go")
			return flow.Stop(), nil
		}
		return flow.Continue(), nil
	case !apierrors.IsNotFound(err):
		return flow.Continue(), fmt.Errorf("reading SpaceRequest %s: %w", name, err)
	}
	if res, wait := r.waitForCreated(ctx, sandbox.KindSpaceRequest, key); wait {
		return res, nil
	}

	spec := map[string]any{"tierName": s.params.TierName}
	if len(s.params.TargetClusterRoles) > 0 {
		roles := make([]any, 0, len(s.params.TargetClusterRoles))
		for _, role := range s.params.TargetClusterRoles {
			roles = append(roles, role)
		}
		spec["targetClusterRoles"] = roles
	}
	metadata := map[string]any{
		"name":      name,
		"namespace": s.claim.Namespace,
		// Labels select (their values are at most 63 characters); the
		// annotations of the same keys hold the full names.
		"labels": map[string]any{
			appstudiov1alpha1.ClaimLabel: appstudiov1alpha1.LabelValue(s.claim.Name),
			appstudiov1alpha1.ClassLabel: appstudiov1alpha1.LabelValue(s.claim.Spec.DeploymentTargetClassName),
		},
	}
	ctx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindClaim, "CreateSpaceRequest", sandbox.AttrSpaceRequest.String(name))
	// The SpaceRequest controller continues the claim's trace from here: the
	// trace context goes into the create itself (nothing with tracing off).
	annotations := tracing.Inject(ctx, map[string]string{
		appstudiov1alpha1.ClaimLabel: s.claim.Name,
		appstudiov1alpha1.ClassLabel: s.claim.Spec.DeploymentTargetClassName,
	})
	metadata["annotations"] = toAny(annotations)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": toolchainv1alpha1.SchemeGroupVersion.String(),
		"kind":       "SpaceRequest",
		"metadata":   metadata,
		"spec":       spec,
	}}
	err = r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(sandbox.FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("applying SpaceRequest %s: %w", name, err)
	}
	r.created.add(sandbox.KindSpaceRequest, key)
	ctrl.LoggerFrom(ctx).Info("created SpaceRequest; waiting for it to be Ready", "tierName", s.params.TierName)
	// Its status change brings the claim back; should none come, the
	// warning delay does, to say that nothing answers it.
	if delay, on := r.spaceRequestWarning(); on {
		return flow.Stop().RequeueAfter(delay), nil
	}
	return flow.Stop(), nil
}

// waitForSpaceRequest stops until the SpaceRequest is Ready, telling the
// claim when it is not for a reason other than provisioning in progress, or
// takes too long (warnSpaceRequest).
func (r *Reconciler) waitForSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	if ok, why := sandbox.SpaceRequestReady(s.sr); !ok {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for the SpaceRequest to be Ready", "status", why)
		return r.warnSpaceRequest(ctx, s)
	}
	// Ready: a later problem of this SpaceRequest (or of the next one) is new.
	r.warnings.clear(client.ObjectKeyFromObject(s.claim), topicSpaceRequest)
	return flow.Continue(), nil
}

// checkCredentialsSecret makes sure the Secret the target will point to
// exists and holds a kubeconfig, so that no target is made with credentials
// that cannot work.
func (r *Reconciler) checkCredentialsSecret(ctx context.Context, s *scope) (flow.Result, error) {
	name := s.sr.Status.NamespaceAccess[0].SecretRef
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: name}, secret)
	if err == nil && len(secret.Data[toolchainv1alpha1.AdminKubeconfigKey]) > 0 {
		return flow.Continue(), nil
	}
	msg := fmt.Sprintf("SpaceRequest %s is Ready but its Secret %s holds no %q", s.sr.Name, name, toolchainv1alpha1.AdminKubeconfigKey)
	if err != nil && !apierrors.IsNotFound(err) {
		return flow.Continue(), fmt.Errorf("reading Secret %s: %w", name, err)
	}
	if apierrors.IsNotFound(err) {
		msg = fmt.Sprintf("SpaceRequest %s is Ready but its Secret %s does not exist", s.sr.Name, name)
	}
	r.Recorder.Eventf(s.claim, s.sr, corev1.EventTypeWarning, EventCredentialsSecretAbsent, "Provision", "%s", msg)
	s.reported = true
	// Retried with back-off: nothing this process watches announces it.
	return flow.Continue(), errors.New(msg)
}

// checkTarget stops once the claim's target exists: an existing target is
// left alone (after creation the binder owns its claimRef and status).
func (r *Reconciler) checkTarget(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	key := client.ObjectKey{Namespace: s.claim.Namespace, Name: name}
	err := r.Client.Get(ctx, key, &appstudiov1alpha1.DeploymentTarget{})
	switch {
	case err == nil:
		r.created.seen(sandbox.KindTarget, key)
		ctrl.LoggerFrom(ctx).V(1).Info("target exists; waiting for the binder")
		// Provisioned: nothing it was told about applies any more.
		r.warnings.forget(client.ObjectKeyFromObject(s.claim))
		return flow.Stop(), nil
	case apierrors.IsNotFound(err):
		res, _ := r.waitForCreated(ctx, sandbox.KindTarget, key)
		return res, nil
	default:
		return flow.Continue(), fmt.Errorf("reading DeploymentTarget %s: %w", name, err)
	}
}

// createTarget creates the target from the Ready SpaceRequest's status. The
// phases before it checked, in the cache, that the claim is not being deleted
// and the SpaceRequest not either; a cache that lags may still show both
// alive after the orphan reconciler deleted the SpaceRequest (confirmed with
// the API server). No read can close that window without a request per claim
// and even then not entirely (the claim can go between the read and the
// create), so the orphan reconciler deletes such a late target when its
// creation event arrives (see package orphan).
func (r *Reconciler) createTarget(ctx context.Context, s *scope) (flow.Result, error) {
	name := sandbox.ObjectName(s.claim)
	access := s.sr.Status.NamespaceAccess[0]
	ctx, span := tracing.StartStep(ctx, sandbox.Tracer(), sandbox.KindClaim, "CreateDeploymentTarget",
		sandbox.AttrTarget.String(name), sandbox.AttrSpaceRequest.String(s.sr.Name))
	// The binder continues the claim's trace from the target: the trace
	// context goes into the create itself (nothing with tracing off).
	annotations := tracing.Inject(ctx, map[string]string{
		appstudiov1alpha1.ProvisionedByAnnotation: appstudiov1alpha1.SandboxProvisioner,
		appstudiov1alpha1.SpaceRequestAnnotation:  s.sr.Name,
		// The claim object, not only its name (claimRef), in the same write.
		appstudiov1alpha1.ClaimAnnotation: appstudiov1alpha1.ClaimRecord(s.claim),
	})
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": appstudiov1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeploymentTarget",
		"metadata": map[string]any{
			"name":        name,
			"namespace":   s.claim.Namespace,
			"annotations": toAny(annotations),
			"finalizers":  []any{appstudiov1alpha1.TargetFinalizer},
		},
		"spec": map[string]any{
			"deploymentTargetClassName": s.claim.Spec.DeploymentTargetClassName,
			"claimRef":                  map[string]any{"name": s.claim.Name},
			"kubernetesCredentials": map[string]any{
				"defaultNamespace":         access.Name,
				"apiURL":                   s.sr.Status.TargetClusterURL,
				"clusterCredentialsSecret": access.SecretRef,
			},
		},
	}}
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(sandbox.FieldManager), client.ForceOwnership)
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("applying DeploymentTarget %s: %w", name, err)
	}
	r.created.add(sandbox.KindTarget, client.ObjectKey{Namespace: s.claim.Namespace, Name: name})
	ctrl.LoggerFrom(ctx).Info("created DeploymentTarget", "target", name, "namespace", access.Name)
	return flow.Continue(), nil
}

// toAny converts annotations for an unstructured object.
func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
