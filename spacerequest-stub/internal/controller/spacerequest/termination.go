package spacerequest

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/text"
	"github.com/terrace-dev/terrace/kit/tracing"
)

func (r *Reconciler) markTerminating(ctx context.Context, s *scope) (flow.Result, error) {
	switch readyReason(s.sr) {
	case toolchainv1alpha1.ReasonTerminating, toolchainv1alpha1.ReasonUnableToTerminate:
		return flow.Continue(), nil
	}
	ns := NamespaceName(s.sr)
	ctrl.LoggerFrom(ctx).Info("terminating", "namespace", ns)
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonTerminating, terminatingMessage(s.sr))
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventTerminating, "Terminate", "%s", terminatingMessage(s.sr))
	return flow.Continue(), nil
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
func (r *Reconciler) terminationFailed(ctx context.Context, s *scope, err error) flow.Result {
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
	return flow.Continue().RequeueAfter(retry)
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

func (r *Reconciler) deleteSecret(ctx context.Context, s *scope) (flow.Result, error) {
	name := SecretName(s.sr)
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) || (err == nil && secret.Annotations[SpaceRequestAnnotation] != Key(s.sr)) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
	}
	spanCtx, span := tracing.StartStep(ctx, tracer(), Kind, "DeleteSecret")
	err = client.IgnoreNotFound(r.Client.Delete(spanCtx, secret, client.Preconditions{UID: &secret.UID}))
	tracing.EndStep(span, err)
	if err != nil {
		return flow.Continue(), fmt.Errorf("deleting Secret %s/%s: %w", s.sr.Namespace, name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted kubeconfig Secret", "secret", name)
	return flow.Continue(), nil
}

// deleteNamespace deletes the namespace and waits for it to go; after the
// termination timeout it reports UnableToTerminate and keeps waiting. The
// namespace's deletion event brings the stub back, so nothing polls.
func (r *Reconciler) deleteNamespace(ctx context.Context, s *scope) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := NamespaceName(s.sr)
	// Read in full, not as metadata (the same one request): once the
	// termination timeout passes, the namespace's status conditions say
	// what holds it up (see stuckNamespaceMessage).
	ns := &corev1.Namespace{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) || (err == nil && ns.Annotations[SpaceRequestAnnotation] != Key(s.sr)) {
		return flow.Continue(), nil
	}
	if err != nil {
		return flow.Continue(), fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp.IsZero() {
		spanCtx, span := tracing.StartStep(ctx, tracer(), Kind, "DeleteNamespace", attrNamespace.String(name))
		err := client.IgnoreNotFound(r.Client.Delete(spanCtx, ns, client.Preconditions{UID: &ns.UID}))
		tracing.EndStep(span, err)
		if err != nil {
			return flow.Continue(), fmt.Errorf("deleting namespace %s: %w", name, err)
		}
		r.deletedNamespaces.deleted(name, ns.UID)
		log.Info("deleting namespace", "namespace", name)
	}

	return r.awaitNamespaceGone(ctx, s, ns), nil
}

// awaitNamespaceGone reports a namespace on its way out: Terminating until
// the termination timeout, then UnableToTerminate quoting what its own
// conditions say holds it up. It stops the list: the finalizer stays until
// the namespace is gone.
func (r *Reconciler) awaitNamespaceGone(ctx context.Context, s *scope, ns *corev1.Namespace) flow.Result {
	log := ctrl.LoggerFrom(ctx)
	name := ns.Name
	elapsed := r.clock().Sub(s.sr.DeletionTimestamp.Time)
	res := flow.Stop()
	if elapsed < r.TerminationTimeout {
		// Also replaces the message of a step that failed before.
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonTerminating, terminatingMessage(s.sr))
		res = res.RequeueAfter(r.TerminationTimeout - elapsed)
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
		res = res.Merge(flow.Continue().RequeueAfter(retry))
		log.V(1).Info("namespace is not in the stub's cache, no event will say it is gone; looking again", "namespace", name, "retryAfter", retry)
	}
	return res
}
