package lib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete

// ExportKey is the key of an export Secret that holds the item's exports as
// one JSON document (which is also YAML), e.g. {"url": "https://…"}.
const ExportKey = "export"

// ExportOwnerLabel marks an export Secret as written by the deploy item its
// value names (in the Secret's namespace). The library only updates and
// deletes Secrets carrying it: a user's Secret that happens to have the
// name "<item>-export" is never taken over or deleted.
const ExportOwnerLabel = "deployers.terrace.dev/export-of"

// ReasonExportConflict is lastError.reason of a job whose export Secret name
// is taken by a Secret the item did not write.
const ReasonExportConflict = "ExportSecretConflict"

// ExportSecretName is the name of an item's export Secret: "<item name>-export",
// in the item's namespace.
func ExportSecretName(di *lsv1alpha1.DeployItem) string { return di.Name + "-export" }

func exportOwnerReference(di *lsv1alpha1.DeployItem) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "DeployItem", Name: di.Name, UID: di.UID}
}

// WriteExport writes export (a JSON document) to the item's export Secret,
// owned by the item and labelled ExportOwnerLabel, and points
// status.exportRef at it. The first export of an item creates the Secret (a
// Secret of that name that the item did not write fails the job with
// ERR_CONFIGURATION_PROBLEM, reason ExportSecretConflict); later ones update
// it by server-side apply. Either way one request.
func WriteExport(ctx context.Context, c client.Client, fieldOwner string, di *lsv1alpha1.DeployItem, export []byte) error {
	name := ExportSecretName(di)
	if di.Status.ExportReference == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: di.Namespace,
				Labels:          map[string]string{ExportOwnerLabel: di.Name},
				OwnerReferences: []metav1.OwnerReference{exportOwnerReference(di)},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{ExportKey: export},
		}
		err := c.Create(ctx, s, client.FieldOwner(fieldOwner))
		if err == nil {
			di.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: di.Namespace}
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return TransientError("ExportFailed", fmt.Errorf("creating export Secret %s/%s: %w", di.Namespace, name, err))
		}
		// It exists: the item's own from a job whose status write was lost
		// (rare), or somebody else's, which is never taken over.
		owned, _, err := exportOwned(ctx, c, di, &corev1.Secret{})
		if err != nil {
			return TransientError("ExportFailed", err)
		}
		if !owned {
			return ConfigError(ReasonExportConflict,
				"export Secret %s/%s already exists and was not written by this deploy item (it lacks the label %s=%s); the library neither takes over nor deletes it: rename or remove that Secret",
				di.Namespace, name, ExportOwnerLabel, di.Name)
		}
	}
	ac := corev1ac.Secret(name, di.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithLabels(map[string]string{ExportOwnerLabel: di.Name}).
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

// exportOwned reports whether the item's export Secret exists (exists) and
// carries the item's ExportOwnerLabel (owned), filling s from the API server
// when it is owned. It asks with a JSON patch whose only operation tests the
// label: the deployer's client caches what it reads, and a Get of a Secret
// would start a cluster-wide Secret informer. A patch that only tests changes
// nothing.
func exportOwned(ctx context.Context, c client.Client, di *lsv1alpha1.DeployItem, s *corev1.Secret) (owned, exists bool, err error) {
	s.Name, s.Namespace = ExportSecretName(di), di.Namespace
	path := "/metadata/labels/" + strings.ReplaceAll(strings.ReplaceAll(ExportOwnerLabel, "~", "~0"), "/", "~1")
	test, err := json.Marshal([]map[string]string{{"op": "test", "path": path, "value": di.Name}})
	if err != nil {
		return false, false, err
	}
	err = c.Patch(ctx, s, client.RawPatch(types.JSONPatchType, test))
	switch {
	case err == nil:
		return true, true, nil
	case apierrors.IsNotFound(err):
		return false, false, nil
	case failedTest(err):
		return false, true, nil
	}
	return false, false, fmt.Errorf("checking export Secret %s/%s: %w", s.Namespace, s.Name, err)
}

// failedTest: the API server answers a JSON patch whose test fails with 422
// (or, on older servers, 400).
func failedTest(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code == http.StatusUnprocessableEntity || code == http.StatusBadRequest
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

// DeleteExport deletes the item's export Secret, if there is one the item
// wrote (labelled ExportOwnerLabel with the item's name). A Secret of that
// name that the item did not write is left alone. An item without
// status.exportRef costs no request: it recorded no export Secret, and one
// whose status write was lost carries the item's owner reference (WriteExport
// sets it on create and on every apply), so the garbage collector deletes it
// with the item.
func DeleteExport(ctx context.Context, c client.Client, di *lsv1alpha1.DeployItem) error {
	if di.Status.ExportReference == nil {
		return nil
	}
	s := &corev1.Secret{}
	owned, exists, err := exportOwned(ctx, c, di, s)
	if err != nil {
		return TransientError("ExportCleanupFailed", err)
	}
	if !owned {
		if exists {
			logf.FromContext(ctx).Info("not deleting a Secret the deploy item did not write", "secret", s.Namespace+"/"+s.Name, "label", ExportOwnerLabel)
		}
		return nil
	}
	// Preconditions: the Secret just tested, not one created meanwhile.
	if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
		return TransientError("ExportCleanupFailed", fmt.Errorf("deleting export Secret %s/%s: %w", s.Namespace, s.Name, err))
	}
	return nil
}
