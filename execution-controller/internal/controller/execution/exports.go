package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/owner"
	"github.com/terrace-dev/terrace/kit/flow"
)

// ExportSecretKey is the key of an item's export Secret that holds the
// exported value (JSON or YAML).
const ExportSecretKey = "export"

// gatherExports collects the exports of the items (the Secrets their
// status.exportRef names) into one DataObject, {<item name>: <value>}, and
// points status.exportRef at it. Items without exportRef contribute nothing;
// when no item exports anything (and no earlier job did), there is no
// DataObject and no status.exportRef.
func (r *Reconciler) gatherExports(ctx context.Context, s *scope) error {
	data, err := r.readExports(ctx, s)
	if err != nil {
		return err
	}
	if len(data) == 0 && s.exec.Status.ExportReference == nil {
		// Nothing exported, and no earlier job's exports to clear: no
		// DataObject (and no request).
		return nil
	}
	return r.writeExports(ctx, s, data)
}

// readExports reads the exports of the job's items (also one removed from
// the spec mid-job: it ran in the job), not the spec's: an item added
// mid-job has not run yet. A Secret that retrying cannot read fails the job.
func (r *Reconciler) readExports(ctx context.Context, s *scope) (map[string]any, error) {
	data := map[string]any{}
	for _, item := range s.exec.Status.DeployItemReferences {
		name := item.Name
		di := s.items[name]
		if di == nil || di.Status.ExportReference == nil {
			continue
		}
		ref := di.Status.ExportReference
		if ref.Namespace != "" && ref.Namespace != di.Namespace {
			return nil, flow.StalledError(ReasonExportsFailed, fmt.Errorf("deploy item %s: exportRef names a Secret in namespace %s; only the item's own namespace is allowed", name, ref.Namespace))
		}
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: di.Namespace, Name: ref.Name}, secret); err != nil {
			err = fmt.Errorf("reading exports of deploy item %s: %w", name, err)
			if apierrors.IsNotFound(err) {
				// The deployer writes the Secret before it names it: one that
				// is missing was deleted, and stays missing until the item runs again.
				return nil, flow.StalledError(ReasonExportsFailed, err)
			}
			return nil, err
		}
		if !ownedBy(secret, di.UID) {
			// Not the deployer's write (it owns its export Secret by the
			// item): someone else's Secret of that name is never read.
			return nil, flow.StalledError(ReasonExportsFailed, fmt.Errorf("deploy item %s: its export Secret %s/%s is not "+
				"owned by the item (no owner reference to DeployItem %s): it is not read; delete that Secret and "+
				"reconcile the execution, so the deployer writes it anew", name, di.Namespace, ref.Name, di.Name))
		}
		v, err := decodeExport(secret)
		if err != nil {
			return nil, flow.StalledError(ReasonExportsFailed, fmt.Errorf("decoding exports of deploy item %s (Secret %s): %w", name, ref.Name, err))
		}
		data[name] = v
	}
	return data, nil
}

// writeExports writes data into the exports DataObject (which a namesake
// being deleted holds back, see namesakeWait) and points status.exportRef at
// it.
func (r *Reconciler) writeExports(ctx context.Context, s *scope, data map[string]any) error {
	name := ExportsObjectName(s.exec.Name)
	cur := &lsv1alpha1.DataObject{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.exec.Namespace, Name: name}, cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading exports DataObject %s: %w", name, err)
	}
	exists := err == nil
	if exists {
		if err := r.checkExportsName(ctx, s, cur, data); err != nil {
			return err
		}
	}
	// The name is free, or this execution's: the job no longer waits for it
	// (should it have).
	nameFree(s, ReasonDataObjectNameTaken)
	if !exists || !ownedBy(cur, s.exec.UID) || !sameData(cur.Data.RawMessage, data) {
		if err := r.applyExports(ctx, s, name, data); err != nil {
			return err
		}
	}
	s.exec.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: s.exec.Namespace}
	return nil
}

// checkExportsName returns nil when cur, the existing DataObject of exec's
// exports name, is the execution's to write data into; otherwise why not.
func (r *Reconciler) checkExportsName(ctx context.Context, s *scope, cur *lsv1alpha1.DataObject, data map[string]any) error {
	owned := ownedBy(cur, s.exec.UID)
	if !owned {
		if cur.DeletionTimestamp != nil {
			// Its deletion frees the name: the job waits (no error: see
			// namesakeWait), and says so in its Progressing condition. The
			// deletion's events wake this execution (namesakeWaiters, from
			// the index of exports names).
			return dataObjectNameTaken(fmt.Sprintf("exports DataObject %s/%s: the name is held by a DataObject "+
				"controlled by %s that is being deleted; waiting for it to go to write the exports anew",
				cur.Namespace, cur.Name, controllerName(cur)))
		}
		if !exportsOfThisName(cur, s.exec) {
			// Someone else's DataObject of that name (say an installation's
			// export with dataRef "<exec>-exports", or one created by hand):
			// never taken over, and no retry can fix it.
			return flow.StalledError(ReasonDataObjectNameConflict, fmt.Errorf(
				"exports DataObject %s/%s exists and is controlled by %s; it is left alone: rename the execution or that DataObject",
				cur.Namespace, cur.Name, controllerName(cur)))
		}
	}
	if cur.DeletionTimestamp != nil || (owned && sameData(cur.Data.RawMessage, data)) {
		return nil // nothing is written over it
	}
	// Labels and owner references can be copied; only the managedFields
	// (which the cache strips) tell who created it.
	live := &lsv1alpha1.DataObject{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cur), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !writtenBy(live, r.FieldManager) {
		return flow.StalledError(ReasonDataObjectNameConflict, fmt.Errorf(
			"exports DataObject %s/%s exists and was not written by %s (none of its fields is managed by it); it is "+
				"left alone: delete or rename that DataObject and reconcile the execution", cur.Namespace, cur.Name, r.FieldManager))
	}
	return nil
}

// applyExports writes the exports DataObject name with data, controlled by
// the execution.
func (r *Reconciler) applyExports(ctx context.Context, s *scope, name string, data map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "DataObject",
		"metadata": map[string]any{
			"name":      name,
			"namespace": s.exec.Namespace,
			"labels":    map[string]any{lsv1alpha1.ManagedByExecutionLabel: ManagedByValue(s.exec.Name)},
			"ownerReferences": []any{map[string]any{
				"apiVersion": lsv1alpha1.SchemeGroupVersion.String(), "kind": "Execution",
				"name": s.exec.Name, "uid": string(s.exec.UID), "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"data": data,
	}}
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(r.FieldManager), client.ForceOwnership)
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err):
		// E.g. a controller set on it since the (cached) read: two
		// controllers are refused.
		return flow.StalledError(ReasonDataObjectNameConflict, fmt.Errorf(
			"exports DataObject %s/%s refused by the API server: %s", s.exec.Namespace, name, invalidFields(err)))
	}
	return fmt.Errorf("writing exports DataObject %s: %w", name, err)
}

// invalidFields describes an Invalid error by the fields it names, not by
// its messages: they may quote the values, and the exports DataObject holds
// what the items exported, Secret values among them.
func invalidFields(err error) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 {
		return "invalid (no field named)"
	}
	fields := make([]string, 0, len(st.Status().Details.Causes))
	for _, c := range st.Status().Details.Causes {
		fields = append(fields, fmt.Sprintf("%s: %s", c.Field, c.Type))
	}
	return "invalid " + strings.Join(fields, ", ")
}

// exportsOfThisName reports whether do, a DataObject named like exec's
// exports that exec does not own, is the exports DataObject of an execution
// of exec's name, which exec takes over (the apply replaces its owner
// reference; this field manager wrote it): controlled by an earlier
// execution of this name (deleted and created again), or controlled by
// nothing but labelled managed-by this name, as every exports DataObject is
// written (its owner reference was removed: the execution was deleted with
// --cascade=orphan). Anything else of that name (controlled by anything
// else, or by nothing and without that label: created by hand) is not.
func exportsOfThisName(do *lsv1alpha1.DataObject, exec *lsv1alpha1.Execution) bool {
	ref := metav1.GetControllerOf(do)
	if ref == nil {
		return do.Labels[lsv1alpha1.ManagedByExecutionLabel] == ManagedByValue(exec.Name)
	}
	exe := owner.Execution(do)
	return exe != nil && exe.Name == exec.Name
}

// ownedBy reports whether o has an owner reference to the object of uid.
func ownedBy(o client.Object, uid types.UID) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// writtenBy reports whether fieldManager manages any field of o: every
// exports DataObject is written by server-side apply under this
// controller's field manager, so one without such an entry was created by
// someone else.
func writtenBy(o client.Object, fieldManager string) bool {
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func sameData(raw json.RawMessage, want map[string]any) bool {
	var have any
	if len(raw) == 0 || json.Unmarshal(raw, &have) != nil {
		return false
	}
	wantRaw, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var w any
	if json.Unmarshal(wantRaw, &w) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(have, w)
}

// decodeExport reads an export Secret: the value under ExportSecretKey, or
// when that key is absent, every key as a field of one object. Values are
// JSON or YAML; anything else is kept as a string.
func decodeExport(secret *corev1.Secret) (any, error) {
	if raw, ok := secret.Data[ExportSecretKey]; ok {
		return decodeValue(raw)
	}
	out := map[string]any{}
	for k, raw := range secret.Data {
		v, err := decodeValue(raw)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func decodeValue(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err == nil {
		return v, nil
	}
	if j, err := yaml.YAMLToJSON(raw); err == nil {
		if err := json.Unmarshal(j, &v); err == nil {
			return v, nil
		}
	}
	return string(raw), nil
}
