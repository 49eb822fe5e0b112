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
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Export Secrets are created, patched (a JSON patch testing the ownership
// label) and deleted, never read: a read through the cached client would
// cache every Secret of the cluster. config/policies/<deployer>.yaml lets the
// deployers write no other Secrets.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;patch;delete

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
// status.exportRef at it. A Secret of that name that does not carry the
// item's label is never written: not on the first export, and not on a later
// one when somebody deleted the item's Secret and created one of their own
// under its name. The job then fails with ERR_CONFIGURATION_PROBLEM, reason
// ExportSecretConflict. One request when the item's Secret is as expected
// (an update of an item with status.exportRef, the first create otherwise).
func WriteExport(ctx context.Context, c client.Client, fieldOwner string, di *lsv1alpha1.DeployItem, export []byte) error {
	name := ExportSecretName(di)
	if di.Status.ExportReference != nil {
		switch err := updateOwnExport(ctx, c, fieldOwner, di, export); {
		case err == nil:
			return nil
		case failedTest(err):
			return exportConflict(di)
		case !apierrors.IsNotFound(err):
			return TransientError("ExportFailed", fmt.Errorf("writing export Secret %s/%s: %w", di.Namespace, name, err))
		}
		// Gone: created anew.
	}
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
	if apierrors.IsAlreadyExists(err) {
		// The item's own from a job whose status write was lost (rare), or
		// somebody else's, which is never taken over.
		err = updateOwnExport(ctx, c, fieldOwner, di, export)
		if failedTest(err) || apierrors.IsNotFound(err) {
			return exportConflict(di)
		}
	}
	if err != nil {
		return TransientError("ExportFailed", fmt.Errorf("writing export Secret %s/%s: %w", di.Namespace, name, err))
	}
	di.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: di.Namespace}
	return nil
}

// updateOwnExport writes export into the item's export Secret with a JSON
// patch whose first operation tests the item's ExportOwnerLabel: the test
// and the write are one request, so a Secret that is not the item's (any
// more) is never written, whatever happened since it was last looked at. A
// failed test is a 422 (see failedTest).
func updateOwnExport(ctx context.Context, c client.Client, fieldOwner string, di *lsv1alpha1.DeployItem, export []byte) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": ownerLabelPath, "value": di.Name},
		{"op": "add", "path": "/data", "value": map[string][]byte{ExportKey: export}},
	})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ExportSecretName(di), Namespace: di.Namespace}}
	return c.Patch(ctx, s, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(fieldOwner))
}

// exportConflict is the error of an export whose Secret name is taken by a
// Secret the item did not write.
func exportConflict(di *lsv1alpha1.DeployItem) error {
	return ConfigError(ReasonExportConflict,
		"export Secret %s/%s exists and was not written by this deploy item (it lacks the label %s=%s); the deployer neither takes over nor deletes it: rename or remove that Secret",
		di.Namespace, ExportSecretName(di), ExportOwnerLabel, di.Name)
}

// ownerLabelPath is ExportOwnerLabel as a JSON pointer (RFC 6901).
var ownerLabelPath = "/metadata/labels/" + strings.ReplaceAll(strings.ReplaceAll(ExportOwnerLabel, "~", "~0"), "/", "~1")

// exportOwned reports whether the item's export Secret exists (exists) and
// carries the item's ExportOwnerLabel (owned), filling s from the API server
// when it is owned. It asks with a JSON patch whose only operation tests the
// label: the deployer's client caches what it reads, and a Get of a Secret
// would start a cluster-wide Secret informer. A patch that only tests changes
// nothing.
func exportOwned(ctx context.Context, c client.Client, di *lsv1alpha1.DeployItem, s *corev1.Secret) (owned, exists bool, err error) {
	s.Name, s.Namespace = ExportSecretName(di), di.Namespace
	test, err := json.Marshal([]map[string]string{{"op": "test", "path": ownerLabelPath, "value": di.Name}})
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
// (or, on older servers, 400) naming no object, unlike a refusal of the
// patched object (validation, admission), which names its kind.
func failedTest(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	status := st.Status()
	named := status.Details != nil && status.Details.Kind != ""
	return (status.Code == http.StatusUnprocessableEntity || status.Code == http.StatusBadRequest) && !named
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
