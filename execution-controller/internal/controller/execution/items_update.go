package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// desiredItem is the apply body of the DeployItem for template t: spec,
// labels, the depends-on annotation and the controller reference. It never
// names status or the deployer's finalizer; syncItems adds the reconcile-time
// annotation to the create of an item handed its job at once.
func desiredItem(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate) (*unstructured.Unstructured, error) {
	labels := map[string]any{}
	for k, v := range desiredLabels(exec, t) {
		labels[k] = v
	}
	meta := map[string]any{
		"name":      ItemObjectName(exec.Name, t.Name),
		"namespace": exec.Namespace,
		"labels":    labels,
		"ownerReferences": []any{map[string]any{
			"apiVersion":         lsv1alpha1.SchemeGroupVersion.String(),
			"kind":               "Execution",
			"name":               exec.Name,
			"uid":                string(exec.UID),
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
	}
	if len(t.DependsOn) > 0 {
		deps := slices.Clone(t.DependsOn)
		sort.Strings(deps)
		meta["annotations"] = map[string]any{lsv1alpha1.DependsOnAnnotation: strings.Join(deps, ",")}
	}
	spec := lsv1alpha1.DeployItemSpec{
		Type:               t.Type,
		Target:             t.Target,
		Context:            exec.Spec.Context,
		Timeout:            t.Timeout,
		UpdateOnChangeOnly: t.UpdateOnChangeOnly,
		OnDelete:           t.OnDelete,
	}
	if len(t.Config.Raw) > 0 {
		spec.Config = t.Config.DeepCopy()
	}
	specMap, err := toMap(spec)
	if err != nil {
		return nil, fmt.Errorf("item %s: %w", t.Name, err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeployItem",
		"metadata":   meta,
		"spec":       specMap,
	}}, nil
}

// desiredLabels are the labels desiredItem gives the item of template t.
func desiredLabels(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate) map[string]string {
	out := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		out[k] = v
	}
	out[lsv1alpha1.ManagedByExecutionLabel] = ManagedByValue(exec.Name)
	out[lsv1alpha1.ExecutionItemNameLabel] = t.Name
	return out
}

// extraLabels are the keys of the labels cur carries that desiredItem would
// not set: labels of other managers or users, or labels this controller set
// from an earlier template that dropped them. Which one only the item's
// managedFields tell (the cache strips them): see ownsAnyLabel.
func extraLabels(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem) []string {
	want := desiredLabels(exec, t)
	var out []string
	for k := range cur.Labels {
		if _, ok := want[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ownsAnyLabel reports whether manager owns one of the labels keys of di (a
// live copy: managedFields) through any of its managedFields entries on the
// main resource: the item's create or an apply of this controller.
func ownsAnyLabel(di *lsv1alpha1.DeployItem, manager string, keys []string) bool {
	for _, mf := range di.ManagedFields {
		if mf.Manager != manager || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		for _, k := range keys {
			if _, ok := fields.Metadata.Labels["f:"+k]; ok {
				return true
			}
		}
	}
	return false
}

// upToDate reports whether cur already matches what desiredItem would apply,
// so that an unchanged item costs no API request. Labels cur carries beyond
// the desired ones are not looked at here (see extraLabels).
func upToDate(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem) bool {
	if cur == nil {
		return false
	}
	if ref := metav1.GetControllerOf(cur); ref == nil || ref.UID != exec.UID {
		return false
	}
	for k, v := range desiredLabels(exec, t) {
		if l, ok := cur.Labels[k]; !ok || l != v {
			return false
		}
	}
	deps := slices.Clone(t.DependsOn)
	sort.Strings(deps)
	if cur.Annotations[lsv1alpha1.DependsOnAnnotation] != strings.Join(deps, ",") {
		return false
	}
	if cur.Spec.Type != t.Type || cur.Spec.Context != exec.Spec.Context ||
		!equality.Semantic.DeepEqual(cur.Spec.Target, t.Target) ||
		!equality.Semantic.DeepEqual(cur.Spec.Timeout, t.Timeout) ||
		cur.Spec.UpdateOnChangeOnly != t.UpdateOnChangeOnly || !equality.Semantic.DeepEqual(cur.Spec.OnDelete, t.OnDelete) {
		return false
	}
	return sameJSON(cur.Spec.Config, &t.Config)
}

func sameJSON(a, b *runtime.RawExtension) bool {
	var av, bv any
	if a != nil && len(a.Raw) > 0 {
		if json.Unmarshal(a.Raw, &av) != nil {
			return false
		}
	}
	if b != nil && len(b.Raw) > 0 {
		if json.Unmarshal(b.Raw, &bv) != nil {
			return false
		}
	}
	return equality.Semantic.DeepEqual(av, bv)
}

// updateItem brings the existing item cur (the execution's own) up to date
// with template t by server-side apply (a job-start path only: spec edits).
//
// An item this controller created is owned by its "Update" entry in
// managedFields (a create is no apply); an apply would share those fields
// with it, and a field the template later drops (a dependsOn, a label,
// spec.timeout) would then never be removed. So before the first apply the
// create's fields are handed to the apply's entry, as kubectl does when
// moving from client-side to server-side apply (csaupgrade). That needs
// managedFields, which the cache strips: the item is read live first.
//
// With extraLabels (the item is up to date but for these labels), the item is
// only written when this controller owns one of them: a label it set from an
// earlier template, which the apply removes. Labels a live read found not to
// be this controller's are remembered (foreignLabels): the next job finds
// them again without a read.
func (r *Reconciler) updateItem(ctx context.Context, s *scope, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem, extraLabels []string) error {
	execKey := client.ObjectKeyFromObject(s.exec)
	if len(extraLabels) > 0 && r.foreignLabels.known(execKey, cur, extraLabels) {
		logf.FromContext(ctx).V(1).Info("deploy item up to date; its other labels are not this controller's",
			"item", t.Name, "deployItem", cur.Name, "labels", extraLabels)
		return nil
	}
	live := &lsv1alpha1.DeployItem{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cur), live); err != nil {
		return fmt.Errorf("reading deploy item %s: %w", cur.Name, err)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != s.exec.UID {
		return flow.StalledError(ReasonDeployItemNameConflict, fmt.Errorf(
			"deploy item %s/%s (item %s of execution %s) is now controlled by %s; it is left alone",
			live.Namespace, live.Name, t.Name, s.exec.Name, controllerName(live)))
	}
	if len(extraLabels) > 0 && !ownsAnyLabel(live, r.FieldManager, extraLabels) {
		r.foreignLabels.remember(execKey, live, extraLabels)
		logf.FromContext(ctx).V(1).Info("deploy item up to date; its other labels are not this controller's",
			"item", t.Name, "deployItem", cur.Name, "labels", extraLabels)
		return nil
	}
	// The apply may take over a label found foreign (a template now
	// setting it): what was found is void from here on.
	r.foreignLabels.drop(execKey, cur.Name)
	if createdByUpdate(live, r.FieldManager) {
		p, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(r.FieldManager), r.FieldManager)
		if err != nil {
			return fmt.Errorf("deploy item %s: moving field ownership to apply: %w", cur.Name, err)
		}
		if p != nil {
			// Guarded by the live resourceVersion (part of the patch): a
			// conflict retries.
			if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, p)); err != nil {
				return fmt.Errorf("deploy item %s: moving field ownership to apply: %w", cur.Name, err)
			}
		}
	}
	u, err := desiredItem(s.exec, t)
	if err != nil {
		return err
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) {
			return flow.StalledError(ReasonDeployItemInvalid, fmt.Errorf(
				"deploy item %s (item %s) refused by the API server: %w", cur.Name, t.Name, err))
		}
		return fmt.Errorf("applying deploy item %s: %w", t.Name, err)
	}
	applied := &lsv1alpha1.DeployItem{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return fmt.Errorf("reading applied deploy item %s: %w", t.Name, err)
	}
	// The apply's response is the whole object as the server has it now
	// (status and resourceVersion included): the hand-over that may
	// follow in this reconcile is guarded by that resourceVersion.
	logf.FromContext(ctx).Info("updated deploy item", "item", t.Name, "deployItem", applied.Name)
	*cur = *applied
	return nil
}

// createdByUpdate reports whether manager owns spec fields of di through an
// "Update" entry: the item's create (the controller's other updates are
// merge patches of annotations only).
func createdByUpdate(di *lsv1alpha1.DeployItem, manager string) bool {
	for _, mf := range di.ManagedFields {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationUpdate && mf.Subresource == "" &&
			mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:spec"`) {
			return true
		}
	}
	return false
}

// toMap converts a typed value into the generic form server-side apply
// sends, dropping empty fields (every field used here is omitempty).
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
