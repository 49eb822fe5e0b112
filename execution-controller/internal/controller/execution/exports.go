package execution

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	if err == nil && !ownedBy(cur, s.exec) {
		if cur.DeletionTimestamp != nil {
			// Its deletion frees the name: the job waits (no error: see
			// namesakeWait), and says so in its Progressing condition. The
			// deletion's events wake this execution (namesakeWaiters, from
			// the index of exports names); a foreign DataObject that is not
			// being deleted fails the job below.
			return dataObjectNameTaken(fmt.Sprintf("exports DataObject %s/%s: the name is held by a DataObject "+
				"controlled by %s that is being deleted; waiting for it to go to write the exports anew",
				cur.Namespace, name, controllerName(cur)))
		}
		if !exportsOfThisName(cur, s.exec) {
			// Someone else's DataObject of that name (say an installation's
			// export with dataRef "<exec>-exports", or one created by hand):
			// never taken over, and no retry can fix it.
			return flow.StalledError(ReasonDataObjectNameConflict, fmt.Errorf(
				"exports DataObject %s/%s exists and is controlled by %s; it is left alone: rename the execution or that DataObject",
				cur.Namespace, name, controllerName(cur)))
		}
	}
	if err == nil || apierrors.IsNotFound(err) {
		// The name is free, or this execution's: the job no longer waits
		// for it (should it have).
		nameFree(s, ReasonDataObjectNameTaken)
	}
	switch {
	case err == nil && ownedBy(cur, s.exec) && sameData(cur.Data.RawMessage, data):
		// unchanged: no write
	case err == nil || apierrors.IsNotFound(err):
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
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
			if apierrors.IsInvalid(err) {
				// E.g. a controller set on it since the (cached) read: two
				// controllers are refused.
				return flow.StalledError(ReasonDataObjectNameConflict, fmt.Errorf(
					"exports DataObject %s/%s refused by the API server: %w", s.exec.Namespace, name, err))
			}
			return fmt.Errorf("writing exports DataObject %s: %w", name, err)
		}
	default:
		return fmt.Errorf("reading exports DataObject %s: %w", name, err)
	}
	s.exec.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: name, Namespace: s.exec.Namespace}
	return nil
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

func ownedBy(o client.Object, exec *lsv1alpha1.Execution) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == exec.UID {
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
