package installation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/mapping"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/stale"
)

// imports are an installation's resolved imports.
type imports struct {
	// values are what templates see as .imports (data values, and targets as
	// objects {metadata: {name, namespace}, spec: {...}}).
	values map[string]any
	// targets are the imported Target objects by the key of their context
	// copy: a target import's name, or blueprint.ListMember/MapMember for
	// the Targets of a targetList or targetMap import.
	targets map[string]*lsv1alpha1.Target
	// imported maps target imports to the Target object names.
	imported blueprint.ImportedTargets
	// groups are the targetList and targetMap imports (name → kind).
	groups map[string]string
	// hash identifies the imports (Completing compares it with Init's).
	hash string
	// configurations are the Context's configurations (.context in templates).
	configurations map[string]any
	// secrets are the values read from Secrets (or from context copies of
	// them): messages never quote them.
	secrets secretValues
	// fromSecret names the data imports read from Secrets (or from
	// context copies of them), whose own context copies say so.
	fromSecret map[string]bool
	// bytes is how much the imports read so far hold.
	bytes int64
}

// dataImportNames are the names of the data imports: what writeContextImports
// copies into the context as DataObjects.
func (im *imports) dataImportNames() []string {
	names := make([]string, 0, len(im.values))
	for name := range im.values {
		if !im.isTarget(name) {
			names = append(names, name)
		}
	}
	return names
}

// isTarget reports whether import name is a target, targetList or
// targetMap import.
func (im *imports) isTarget(name string) bool {
	_, single := im.targets[name]
	return single || im.groups[name] != ""
}

// targetImportNames are the names of the target imports: what
// writeContextImports copies into the context as Targets.
func (im *imports) targetImportNames() []string {
	names := make([]string, 0, len(im.targets))
	for name := range im.targets {
		names = append(names, name)
	}
	return names
}

// importReads says where resolveImports reads imported DataObjects and
// Targets from (Secrets and ConfigMaps are always read from the API server).
type importReads bool

const (
	// fromCache reads them from the informer cache, and from the API server
	// only what the cache does not show.
	fromCache importReads = false
	// fromAPIServer reads them from the API server. A job's Init does: the
	// values it starts with must be the current ones, not what a lagging
	// informer shows. A user who updates an import and then starts a job,
	// or a parent that rewrites its context right before it hands the job
	// over, would else start the job with the old value, and Completing,
	// reading the new one, would fail it with ImportsChanged although nothing
	// changed during the job. One GET per such import per job.
	fromAPIServer importReads = true
)

// resolveImports reads every import, applies the import data mappings and
// checks the result against the blueprint. Every error of its own is stalled: the job
// cannot continue without its imports; a user fixes them and starts a new job.
func (r *Reconciler) resolveImports(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, reads importReads) (*imports, error) {
	im := &imports{values: map[string]any{}, targets: map[string]*lsv1alpha1.Target{}, groups: map[string]string{}, fromSecret: map[string]bool{},
		imported: blueprint.ImportedTargets{Single: map[string]string{}, Lists: map[string][]string{}, Maps: map[string]map[string]string{}}}
	if err := r.checkImportCount(inst); err != nil {
		return nil, err
	}
	cfg, err := r.readContext(ctx, inst)
	if err != nil {
		return nil, err
	}
	im.configurations = cfg
	targetTypes, err := r.readImports(ctx, inst, im, reads)
	if err != nil {
		return nil, im.secrets.redactErr(err)
	}
	if err := im.mapAndComplete(ctx, inst, bp, targetTypes); err != nil {
		return nil, im.secrets.redactErr(err)
	}
	if err := im.runImportExecutions(ctx, inst, bp); err != nil {
		return nil, im.secrets.redactErr(err)
	}
	return im, nil
}

// readImports reads every data and target import into im, within the
// bound on their bytes, and returns the target imports' kinds and types.
func (r *Reconciler) readImports(ctx context.Context, inst *lsv1alpha1.Installation, im *imports, reads importReads) (map[string]blueprint.ProvidedTarget, error) {
	scope := parentName(inst)
	for _, d := range inst.Spec.Imports.Data {
		v, err := r.readDataImport(ctx, reads, inst.Namespace, scope, d, im)
		if err != nil {
			return nil, err
		}
		im.values[d.Name] = v
		if im.fromSecret[d.Name] {
			im.secrets.add(v)
		}
	}
	provided := map[string]blueprint.ProvidedTarget{}
	for _, t := range inst.Spec.Imports.Targets {
		p, err := r.readTargetImport(ctx, reads, inst, scope, t, im)
		if err != nil {
			return nil, err
		}
		provided[t.Name] = p
	}
	return provided, nil
}

// mapAndComplete applies the import data mappings, then completes and
// checks the imports against the blueprint, and hashes them.
func (im *imports) mapAndComplete(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, targetTypes map[string]blueprint.ProvidedTarget) error {
	rctx, cancel := renderContext(ctx)
	defer cancel()
	if len(inst.Spec.ImportDataMappings) > 0 {
		mappings, err := dataMappings(inst.Spec.ImportDataMappings)
		if err != nil {
			return flow.StalledError(ReasonDataMappingFailed, fmt.Errorf("importDataMappings: %w", err))
		}
		mapped, err := mapping.EvaluateContext(rctx, mappings, mapping.ImportsVar, im.values)
		if err != nil {
			return flow.StalledError(ReasonDataMappingFailed, fmt.Errorf("importDataMappings: %w", err))
		}
		for k, v := range mapped {
			im.values[k] = v
		}
	}
	completed, err := bp.CompleteImportsContext(rctx, im.values, targetTypes)
	if err != nil {
		return flow.StalledError(ReasonImportInvalid, err)
	}
	im.values = completed
	raw, err := json.Marshal(completed)
	if err != nil {
		return flow.StalledError(ReasonImportInvalid, fmt.Errorf("imports are not JSON: %w", err))
	}
	sum := sha256.Sum256(raw)
	im.hash = hex.EncodeToString(sum[:])
	return nil
}

func scopeHint(scope, ref string) string {
	if scope == "" {
		return ""
	}
	return fmt.Sprintf(" (%q in the context of parent installation %s: an import of the parent or an export of a sibling)", ref, scope)
}

func targetValue(t *lsv1alpha1.Target) map[string]any {
	spec := map[string]any{"type": t.Spec.Type}
	if t.Spec.Config != nil && len(t.Spec.Config.RawMessage) > 0 {
		var cfg any
		if err := json.Unmarshal(t.Spec.Config.RawMessage, &cfg); err == nil {
			spec["config"] = cfg
		}
	}
	if t.Spec.SecretRef != nil {
		spec["secretRef"] = map[string]any{"name": t.Spec.SecretRef.Name, "key": t.Spec.SecretRef.Key}
	}
	return map[string]any{
		"metadata": map[string]any{"name": t.Name, "namespace": t.Namespace},
		"spec":     spec,
	}
}

// getImport reads an imported DataObject or Target, or the execution's
// exports (see importReads). One the cache does not show is read from the
// API server before it counts as missing: a parent writes its context
// objects, a predecessor and the execution their exports, right before the
// write that wakes this reconcile, and their informer may not have them yet.
func (r *Reconciler) getImport(ctx context.Context, reads importReads, key client.ObjectKey, obj client.Object) error {
	if reads == fromAPIServer {
		return r.APIReader.Get(ctx, key, obj)
	}
	return stale.Get(ctx, r.Client, r.APIReader, key, obj)
}

func (r *Reconciler) readDataImport(ctx context.Context, reads importReads, ns, scope string, d lsv1alpha1.DataImport, im *imports) (any, error) {
	what := "data import " + strconv.Quote(d.Name)
	switch {
	case d.DataRef != "":
		name := ScopedName(scope, d.DataRef)
		do := &lsv1alpha1.DataObject{}
		if err := r.getImport(ctx, reads, client.ObjectKey{Namespace: ns, Name: name}, do); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, flow.Stalledf(ReasonImportNotFound, "data import %q: DataObject %s/%s does not exist%s", d.Name, ns, name, scopeHint(scope, d.DataRef))
			}
			return nil, err
		}
		if err := r.countImportBytes(im, what, len(do.Data.RawMessage)); err != nil {
			return nil, err
		}
		im.fromSecret[d.Name] = do.Annotations[FromSecretAnnotation] == "true"
		return decodeJSON(do.Data.RawMessage)
	case d.SecretRef != nil:
		sec := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.SecretRef.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, flow.Stalledf(ReasonImportNotFound, "data import %q: Secret %s/%s does not exist", d.Name, ns, d.SecretRef.Name)
			}
			return nil, err
		}
		data := map[string]string{}
		for k, v := range sec.Data {
			data[k] = string(v)
		}
		im.fromSecret[d.Name] = true
		if err := r.countImportBytes(im, what, importedBytes(data, d.SecretRef.Key)); err != nil {
			return nil, err
		}
		return pickKey(d.Name, "Secret", d.SecretRef.Name, d.SecretRef.Key, data)
	case d.ConfigMapRef != nil:
		cm := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.ConfigMapRef.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, flow.Stalledf(ReasonImportNotFound, "data import %q: ConfigMap %s/%s does not exist", d.Name, ns, d.ConfigMapRef.Name)
			}
			return nil, err
		}
		if err := r.countImportBytes(im, what, importedBytes(cm.Data, d.ConfigMapRef.Key)); err != nil {
			return nil, err
		}
		return pickKey(d.Name, "ConfigMap", d.ConfigMapRef.Name, d.ConfigMapRef.Key, cm.Data)
	}
	return nil, flow.Stalledf(ReasonImportInvalid, "data import %q names no source", d.Name)
}

// pickKey returns one key's value (JSON-decoded when it is a JSON object or
// list, else the string), or all keys as a map when key is empty.
func pickKey(imp, kind, name, key string, data map[string]string) (any, error) {
	if key == "" {
		out := map[string]any{}
		for k, v := range data {
			out[k] = v
		}
		return out, nil
	}
	v, ok := data[key]
	if !ok {
		return nil, flow.Stalledf(ReasonImportNotFound, "data import %q: %s %s has no key %q", imp, kind, name, key)
	}
	var decoded any
	if err := json.Unmarshal([]byte(v), &decoded); err == nil {
		switch decoded.(type) {
		case map[string]any, []any:
			return decoded, nil
		}
	}
	return v, nil
}

func decodeJSON(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding data: %w", err)
	}
	return v, nil
}

// readContext returns the configurations of the installation's Context. A
// missing "default" Context counts as empty; any other is an error.
func (r *Reconciler) readContext(ctx context.Context, inst *lsv1alpha1.Installation) (map[string]any, error) {
	name := inst.Spec.Context
	if name == "" {
		name = lsv1alpha1.DefaultContextName
	}
	c := &lsv1alpha1.Context{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			if name == lsv1alpha1.DefaultContextName {
				return map[string]any{}, nil
			}
			return nil, flow.Stalledf(ReasonContextNotFound, "Context %s/%s (spec.context) does not exist", inst.Namespace, name)
		}
		return nil, err
	}
	out := map[string]any{}
	for k, v := range c.Configurations {
		val, err := decodeJSON(v.RawMessage)
		if err != nil {
			return nil, err
		}
		out[k] = val
	}
	return out, nil
}

// dataMappings parses an installation's import or export data mappings.
func dataMappings(m map[string]lsv1alpha1.AnyJSON) (mapping.Mappings, error) {
	raw := make(map[string][]byte, len(m))
	for k, v := range m {
		raw[k] = v.RawMessage
	}
	return mapping.Parse(raw)
}
