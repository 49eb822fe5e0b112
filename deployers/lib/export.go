package lib

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete

// ExportKey is the key of an export Secret that holds the item's exports as
// one JSON document (which is also YAML), e.g. {"url": "https://…"}.
const ExportKey = "export"

// ExportSecretName is the name of an item's export Secret: "<item name>-export",
// in the item's namespace.
func ExportSecretName(di *lsv1alpha1.DeployItem) string { return di.Name + "-export" }

// WriteExport writes export (a JSON document) to the item's export Secret by
// server-side apply, owned by the item, and points status.exportRef at it.
func WriteExport(ctx context.Context, c client.Client, fieldOwner string, di *lsv1alpha1.DeployItem, export []byte) error {
	name := ExportSecretName(di)
	ac := corev1ac.Secret(name, di.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{ExportKey: export}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(lsv1alpha1.SchemeGroupVersion.String()).
			WithKind("DeployItem").
			WithName(di.Name).
			WithUID(di.UID))
	if err := c.Apply(ctx, ac, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return TransientError("ExportFailed", fmt.Errorf("writing export Secret %s/%s: %w", di.Namespace, name, err))
	}
	di.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: di.Namespace}
	return nil
}

// ClearExport is WriteExport for an item that exports nothing (any more):
// it deletes the export Secret a former job wrote and clears
// status.exportRef, so the execution does not carry an old export forward.
func ClearExport(ctx context.Context, c client.Client, di *lsv1alpha1.DeployItem) error {
	if di.Status.ExportReference == nil {
		return nil
	}
	if err := DeleteExport(ctx, c, di); err != nil {
		return err
	}
	di.Status.ExportReference = nil
	return nil
}

// DeleteExport deletes the item's export Secret, if any.
func DeleteExport(ctx context.Context, c client.Client, di *lsv1alpha1.DeployItem) error {
	s := &corev1.Secret{}
	s.Name, s.Namespace = ExportSecretName(di), di.Namespace
	if err := c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return TransientError("ExportCleanupFailed", fmt.Errorf("deleting export Secret %s/%s: %w", s.Namespace, s.Name, err))
	}
	return nil
}
