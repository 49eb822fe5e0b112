package spacerequest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

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
