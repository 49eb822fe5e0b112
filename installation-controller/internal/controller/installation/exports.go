package installation

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/mapping"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
	"github.com/terrace-dev/terrace/kit/flow"
)

// computeExports renders the blueprint's export executions, applies the
// export data mappings and validates the result.
func (r *Reconciler) computeExports(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, im *imports) (map[string]any, error) {
	values, collections, err := r.exportValues(ctx, inst, im)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Completing may run right after the execution was seen finished:
			// its exports DataObject (another informer) may not be cached yet.
			return nil, waitf("the execution's exports to appear: %v", err)
		}
		return nil, err
	}
	state, err := r.loadTemplateState(ctx, inst, len(bp.ExportExecutions))
	if err != nil {
		return nil, err
	}
	rctx, cancel := renderContext(ctx)
	defer cancel()
	exports, written, err := bp.RenderExportsWithState(rctx, values, state, collections...)
	if err != nil {
		return nil, templateFailure(im.secrets.redactErr(err))
	}
	if err := r.saveTemplateState(ctx, inst, bp, state, false, written); err != nil {
		return nil, err
	}
	if len(inst.Spec.ExportDataMappings) > 0 {
		mappings, err := dataMappings(inst.Spec.ExportDataMappings)
		if err != nil {
			return nil, flow.StalledError(ReasonDataMappingFailed, fmt.Errorf("exportDataMappings: %w", err))
		}
		mapped, err := mapping.EvaluateContext(rctx, mappings, mapping.ExportsVar, exports)
		if err != nil {
			return nil, im.secrets.redactErr(flow.StalledError(ReasonDataMappingFailed, fmt.Errorf("exportDataMappings: %w", err)))
		}
		for k, v := range mapped {
			exports[k] = v
		}
	}
	if err := bp.ValidateExportsContext(rctx, exports); err != nil {
		return nil, im.secrets.redactErr(flow.StalledError(ReasonExportInvalid, err))
	}
	return exports, nil
}

// exportValues builds what export executions see: the standard binding
// (.imports, .context, .installation) and the exports of the execution's
// deploy items and of the sub-installations (blueprint.ExportValues).
func (r *Reconciler) exportValues(ctx context.Context, inst *lsv1alpha1.Installation, im *imports) (map[string]any, []tmpl.Collection, error) {
	b, err := r.executionExports(ctx, inst)
	if err != nil {
		return nil, nil, err
	}
	b.DataObjects, b.Targets, err = r.contextValues(ctx, inst)
	if err != nil {
		return nil, nil, err
	}
	values, collections := blueprint.ExportValues(map[string]any{
		"imports":      im.values,
		"context":      im.configurations,
		"installation": map[string]any{"name": inst.Name, "namespace": inst.Namespace},
	}, b)
	return values, collections, nil
}

// executionExports reads the exports of the installation's execution (per
// deploy item) and the names of its deploy items, none without an
// execution. A NotFound error says the exports DataObject is not there yet.
func (r *Reconciler) executionExports(ctx context.Context, inst *lsv1alpha1.Installation) (blueprint.ExportBindings, error) {
	b := blueprint.ExportBindings{DeployItems: map[string]any{}}
	ref := inst.Status.ExecutionReference
	if ref == nil {
		return b, nil
	}
	exec := &lsv1alpha1.Execution{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: ref.Name}, exec); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone in Completing: an error to retry, not the wait for
			// exports not cached yet that NotFound means to the caller.
			return b, fmt.Errorf("execution %s not found", ref.Name)
		}
		return b, fmt.Errorf("reading execution %s: %w", ref.Name, err)
	}
	for _, it := range exec.Spec.DeployItems {
		b.ItemNames = append(b.ItemNames, it.Name)
	}
	er := exec.Status.ExportReference
	if er == nil {
		return b, nil
	}
	ns := er.Namespace
	if ns == "" {
		ns = inst.Namespace
	}
	do := &lsv1alpha1.DataObject{}
	// Written right before the execution's status that woke this
	// reconcile, on another watch: read live when the cache does not
	// show it yet (no event of it would wake this installation).
	if err := r.getImport(ctx, fromCache, client.ObjectKey{Namespace: ns, Name: er.Name}, do); err != nil {
		return b, fmt.Errorf("reading the execution's exports %s: %w", er.Name, err)
	}
	v, err := decodeJSON(do.Data.RawMessage)
	if err != nil {
		return b, err
	}
	if m, ok := v.(map[string]any); ok {
		b.DeployItems = m
	}
	return b, nil
}

// contextValues reads the installation's context, where its
// sub-installations wrote their exports: DataObjects and Targets by key.
func (r *Reconciler) contextValues(ctx context.Context, inst *lsv1alpha1.Installation) (map[string]any, map[string]any, error) {
	// The sub-installations write their exports into this installation's
	// context right before the status writes that wake it, on other
	// watches: with sub-installations the context is listed from the API
	// server, or a lagging cache would export a missing or old value.
	contextReader := client.Reader(r.Client)
	if len(inst.Status.InstallationReferences) > 0 {
		contextReader = r.APIReader
	}
	inContext := []client.ListOption{client.InNamespace(inst.Namespace), client.MatchingLabels{ContextLabel: labelValue(inst.Name)}}
	dataobjects := map[string]any{}
	dos := &lsv1alpha1.DataObjectList{}
	if err := contextReader.List(ctx, dos, inContext...); err != nil {
		return nil, nil, fmt.Errorf("listing context data objects: %w", err)
	}
	for i := range dos.Items {
		v, err := decodeJSON(dos.Items[i].Data.RawMessage)
		if err != nil {
			return nil, nil, err
		}
		dataobjects[dos.Items[i].Annotations[KeyAnnotation]] = v
	}
	targets := map[string]any{}
	ts := &lsv1alpha1.TargetList{}
	if err := contextReader.List(ctx, ts, inContext...); err != nil {
		return nil, nil, fmt.Errorf("listing context targets: %w", err)
	}
	for i := range ts.Items {
		targets[ts.Items[i].Annotations[KeyAnnotation]] = targetValue(&ts.Items[i])
	}
	return dataobjects, targets, nil
}

// writeExports writes spec.exports: data as DataObjects, targets as Targets,
// in the parent's context (verbatim names for root installations).
func (r *Reconciler) writeExports(ctx context.Context, inst *lsv1alpha1.Installation, exports map[string]any) error {
	scope := parentName(inst)
	for _, d := range inst.Spec.Exports.Data {
		v, ok := exports[d.Name]
		if !ok {
			return flow.Stalledf(ReasonExportInvalid, "export %q: the blueprint's export executions and the exportDataMappings produce no such value (they produce: %s)", d.Name, strings.Join(sortedKeys(exports), ", "))
		}
		w := contextWrite{scope: scope, ref: d.DataRef, what: dataExportWhat(d), invalid: ReasonExportInvalid}
		if err := r.writeDataObject(ctx, inst, w, v); err != nil {
			return err
		}
	}
	for _, t := range inst.Spec.Exports.Targets {
		v, ok := exports[t.Name]
		if !ok {
			return flow.Stalledf(ReasonExportInvalid, "target export %q: no such export value", t.Name)
		}
		exported, err := targetOf(v)
		if err != nil {
			return flow.StalledError(ReasonExportInvalid, fmt.Errorf("target export %q: %w", t.Name, err))
		}
		w := contextWrite{scope: scope, ref: t.Target, what: targetExportWhat(t), invalid: ReasonExportInvalid}
		w.labels, w.annotations = exported.labels, exported.annotations
		if err := r.writeTarget(ctx, inst, w, exported.spec); err != nil {
			return err
		}
	}
	return nil
}

// dataExportWhat and targetExportWhat name an export in messages.
func dataExportWhat(d lsv1alpha1.DataExport) string {
	return fmt.Sprintf("export %q (dataRef %q)", d.Name, d.DataRef)
}

func targetExportWhat(t lsv1alpha1.TargetExport) string {
	return fmt.Sprintf("target export %q (target %q)", t.Name, t.Target)
}

// exportedTarget is a target export value: the spec of the Target to
// write, and the labels and annotations it carries.
type exportedTarget struct {
	spec                lsv1alpha1.TargetSpec
	labels, annotations map[string]string
}

// targetOf accepts a bare spec with optional labels and annotations
// ({type, config, labels, annotations}, as Landscaper documents target
// exports) or a Target ({metadata: {labels, annotations}, spec: {...}}).
func targetOf(v any) (exportedTarget, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return exportedTarget{}, fmt.Errorf("must be a mapping with type and config, got %T", v)
	}
	meta := m
	if spec, ok := m["spec"].(map[string]any); ok {
		meta, _ = m["metadata"].(map[string]any)
		m = spec
	}
	var t exportedTarget
	var err error
	if t.labels, err = stringMap(meta, "labels"); err != nil {
		return exportedTarget{}, err
	}
	if t.annotations, err = stringMap(meta, "annotations"); err != nil {
		return exportedTarget{}, err
	}
	spec := make(map[string]any, len(m))
	for k, val := range m {
		if k != "labels" && k != "annotations" {
			spec[k] = val
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return exportedTarget{}, err
	}
	if err := json.Unmarshal(raw, &t.spec); err != nil {
		return exportedTarget{}, err
	}
	if t.spec.Type == "" {
		return exportedTarget{}, fmt.Errorf("has no type")
	}
	return t, nil
}

// stringMap reads m[key] as a map of strings (labels, annotations).
func stringMap(m map[string]any, key string) (map[string]string, error) {
	raw, ok := m[key].(map[string]any)
	if !ok {
		if m[key] != nil {
			return nil, fmt.Errorf("%s must be a mapping of strings, got %T", key, m[key])
		}
		return nil, nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%q] must be a string, got %T", key, k, v)
		}
		out[k] = s
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
