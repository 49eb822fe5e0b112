package spacerequest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// applyNamespace makes sure the SpaceRequest's namespace exists and is the
// stub's: created when missing, labelled again when it lost the stub's
// label, and never taken over from someone else (see namespaceInUse).
func (r *Reconciler) applyNamespace(ctx context.Context, s *scope) (flow.Result, error) {
	name := NamespaceName(s.sr)
	existing := metadataOf(namespaceGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Name: name}, existing)
	// live: existing was read from the API server, not from Managed.
	live := false
	if apierrors.IsNotFound(err) {
		if _, left, ok := r.unseen.pending(namespaceKey(name), r.clock()); ok {
			// Created by the stub moments ago, with all it applies; Managed
			// has not shown it yet, and its event brings the next reconcile.
			return flow.Continue().RequeueAfter(left), nil
		}
		// Not the stub's, or not labelled, or not cached yet: create it, and
		// if it exists, look at it on the API server.
		created, cerr := r.createNamespace(ctx, s, name)
		if created {
			return flow.Continue(), nil
		}
		err = cerr
		if apierrors.IsAlreadyExists(err) {
			err, live = r.readLive(ctx, client.ObjectKey{Name: name}, existing), true
		}
	}
	switch {
	case err != nil:
		return flow.Continue(), fmt.Errorf("reading namespace %s: %w", name, err)
	case existing.Annotations[SpaceRequestAnnotation] != Key(s.sr) || !existing.DeletionTimestamp.IsZero():
		return r.namespaceInUse(ctx, s, existing, live), nil
	case hasAll(existing.Labels, namespaceLabels()):
		// Labels and annotations are all the stub applies: nothing to do.
		return flow.Continue(), nil
	}

	// The stub's, without its labels (removed or changed by someone with
	// rights on namespaces): label it again.
	ns := corev1ac.Namespace(name).
		WithLabels(namespaceLabels()).
		WithAnnotations(map[string]string{SpaceRequestAnnotation: Key(s.sr)})
	if err := r.apply(ctx, "ApplyNamespace", name, ns); err != nil {
		return flow.Continue(), fmt.Errorf("applying namespace %s: %w", name, err)
	}
	return flow.Continue(), nil
}

// createNamespace creates the namespace, failing (AlreadyExists) on one
// that exists: a create never takes over a namespace.
func (r *Reconciler) createNamespace(ctx context.Context, s *scope, name string) (bool, error) {
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      namespaceLabels(),
		Annotations: map[string]string{SpaceRequestAnnotation: Key(s.sr)},
	}}
	if err := r.create(ctx, "ApplyNamespace", name, created); err != nil {
		return false, err
	}
	r.unseen.created(namespaceKey(name), created, r.clock())
	ctrl.LoggerFrom(ctx).Info("created namespace", "namespace", name)
	if s.wasReady {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventNamespaceCreated, "Provision", "Created namespace %s", name)
	}
	return true, nil
}

// namespaceInUse stops provisioning at a namespace of the SpaceRequest's
// name that the stub cannot use: someone else's (looked at again every
// foreignNamespaceRetry, as nothing the stub watches says when that is
// resolved) or one still terminating from an earlier SpaceRequest of the
// same name (its deletion event brings the stub back if Managed holds it;
// one read live from the API server, having lost the stub's label, goes
// without an event: looked at again with a bounded back-off).
func (r *Reconciler) namespaceInUse(ctx context.Context, s *scope, existing *metav1.PartialObjectMetadata, live bool) flow.Result {
	name := existing.Name
	if existing.Annotations[SpaceRequestAnnotation] != Key(s.sr) {
		msg := fmt.Sprintf("Namespace %s already exists and was not created for this SpaceRequest", name)
		if readyReason(s.sr) != toolchainv1alpha1.ReasonProvisioning || !conditionMessageIs(s.sr, msg) {
			r.Recorder.Eventf(s.sr, nil, corev1.EventTypeWarning, EventNamespaceNotOwned, "Provision", "%s", msg)
		}
		r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
		ctrl.LoggerFrom(ctx).Info("namespace exists and belongs to something else", "namespace", name,
			"owner", existing.Annotations[SpaceRequestAnnotation])
		return flow.Stop().RequeueAfter(foreignNamespaceRetry)
	}
	msg := fmt.Sprintf("Namespace %s is still terminating from an earlier SpaceRequest; waiting for it to go", name)
	if !conditionMessageIs(s.sr, msg) {
		r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventNamespaceTerminating, "Provision", "%s", msg)
	}
	r.setReady(s.sr, metav1.ConditionFalse, toolchainv1alpha1.ReasonProvisioning, msg)
	if live {
		return flow.Stop().RequeueAfter(backoff(r.clock().Sub(existing.DeletionTimestamp.Time)))
	}
	return flow.Stop()
}
