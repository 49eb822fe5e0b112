package helm

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// checkSet is the readiness checks, object exports and deletion groups of
// the configuration as the manifest deployer's machinery takes them (no
// objects yet); every problem is a configuration error naming the field.
func checkSet(cfg *config) (*manifest.ObjectSet, error) {
	rc, err := readinessOf(cfg.spec.ReadinessChecks)
	if err != nil {
		return nil, err
	}
	set := &manifest.ObjectSet{ReadinessChecks: rc}
	if set.Values, set.Exports, err = exportsOf(cfg); err != nil {
		return nil, err
	}
	set.DeletionGroups = deletionGroupsOf(cfg.spec.DeletionGroups)
	set.DeletionGroupsDuringUpdate = deletionGroupsOf(cfg.spec.DeletionGroupsDuringUpdate)
	if err := set.Validate(); err != nil {
		return nil, err
	}
	return set, nil
}

// readinessOf converts the readiness checks. Helm's configuration writes
// operators as Kubernetes selectors do (!, =, notin) and values as JSON.
func readinessOf(in helmv1alpha1.ReadinessCheckConfiguration) (manifestv1alpha2.ReadinessCheckConfiguration, error) {
	out := manifestv1alpha2.ReadinessCheckConfiguration{DisableDefault: in.DisableDefault}
	var err error
	if out.Timeout, err = duration("spec.config.readinessChecks.timeout", in.Timeout); err != nil {
		return out, err
	}
	for i, c := range in.CustomReadinessChecks {
		field := fmt.Sprintf("spec.config.readinessChecks.custom[%d]", i)
		switch {
		case c.Disabled:
			continue
		case c.TargetName != nil:
			return out, lib.ConfigError(manifest.ReasonReadinessInvalid, "%s.targetName: checks on another Target's cluster are not supported yet", field)
		case c.Timeout != nil:
			return out, lib.ConfigError(manifest.ReasonReadinessInvalid, "%s.timeout: a timeout per check is not supported; set readinessChecks.timeout", field)
		}
		chk := manifestv1alpha2.CustomReadinessCheck{Name: c.Name}
		if ls := c.LabelSelector; ls != nil {
			chk.LabelSelector = &manifestv1alpha2.LabelSelectorSpec{APIVersion: ls.APIVersion, Kind: ls.Kind, Labels: ls.Labels}
		}
		for _, r := range c.Resource {
			chk.Resource = append(chk.Resource, manifestv1alpha2.TypedObjectReference(r))
		}
		for j, r := range c.Requirements {
			req, err := requirementOf(fmt.Sprintf("%s.requirements[%d]", field, j), r)
			if err != nil {
				return out, err
			}
			chk.Requirements = append(chk.Requirements, req)
		}
		out.CustomReadinessChecks = append(out.CustomReadinessChecks, chk)
	}
	return out, nil
}

// selectorOperators name the operators as Landscaper's configurations
// write them (Kubernetes selector symbols and names, any case).
var selectorOperators = map[string]manifestv1alpha2.ReadinessOperator{
	"exists":       manifestv1alpha2.ReadinessOperatorExists,
	"!":            manifestv1alpha2.ReadinessOperatorNotExists,
	"doesnotexist": manifestv1alpha2.ReadinessOperatorNotExists,
	"notexists":    manifestv1alpha2.ReadinessOperatorNotExists,
	"=":            manifestv1alpha2.ReadinessOperatorEquals,
	"==":           manifestv1alpha2.ReadinessOperatorEquals,
	"equals":       manifestv1alpha2.ReadinessOperatorEquals,
	"!=":           manifestv1alpha2.ReadinessOperatorNotEquals,
	"notequals":    manifestv1alpha2.ReadinessOperatorNotEquals,
	"in":           manifestv1alpha2.ReadinessOperatorIn,
	"notin":        manifestv1alpha2.ReadinessOperatorNotIn,
}

// requirementOf converts a requirement. A value is a JSON value, or, as
// Landscaper's examples write it, an object {value: <JSON value>}.
func requirementOf(field string, r helmv1alpha1.RequirementSpec) (manifestv1alpha2.ReadinessRequirement, error) {
	op, ok := selectorOperators[strings.ToLower(r.Operator)]
	if !ok {
		op = manifestv1alpha2.ReadinessOperator(r.Operator) // reported by the shape check, naming it
	}
	out := manifestv1alpha2.ReadinessRequirement{JSONPath: r.JSONPath, Operator: op}
	for k, v := range r.Values {
		var val any
		if err := json.Unmarshal(v.Raw, &val); err != nil {
			return out, lib.ConfigError(manifest.ReasonReadinessInvalid, "%s.values[%d]: not a JSON value: %v", field, k, err)
		}
		if m, isObject := val.(map[string]any); isObject && len(m) == 1 {
			if inner, wrapped := m["value"]; wrapped {
				val = inner
			}
		}
		if str, isString := val.(string); isString {
			out.Values = append(out.Values, str)
			continue
		}
		text, _ := json.Marshal(val)
		out.Values = append(out.Values, string(text))
	}
	return out, nil
}

func duration(field string, d *lsv1alpha1.Duration) (*metav1.Duration, error) {
	if d == nil || *d == "" {
		return nil, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil || v <= 0 {
		return nil, lib.ConfigError(lib.ReasonInvalidConfig, "%s: %q is not a positive duration such as \"5m\"", field, *d)
	}
	return &metav1.Duration{Duration: v}, nil
}

// deletionGroupsOf converts deletion groups (the same fields in both APIs).
func deletionGroupsOf(in []helmv1alpha1.DeletionGroupDefinition) []manifestv1alpha2.DeletionGroupDefinition {
	var out []manifestv1alpha2.DeletionGroupDefinition
	for _, g := range in {
		var o manifestv1alpha2.DeletionGroupDefinition
		if p := g.PredefinedResourceGroup; p != nil {
			o.PredefinedResourceGroup = &manifestv1alpha2.PredefinedResourceGroup{Type: manifestv1alpha2.PredefinedResourceGroupType(p.Type), ForceDelete: p.ForceDelete}
		}
		if c := g.CustomResourceGroup; c != nil {
			o.CustomResourceGroup = &manifestv1alpha2.CustomResourceGroup{ForceDelete: c.ForceDelete, DeleteAllResources: c.DeleteAllResources}
			for _, r := range c.Resources {
				o.CustomResourceGroup.Resources = append(o.CustomResourceGroup.Resources, manifestv1alpha2.ResourceType(r))
			}
		}
		out = append(out, o)
	}
	return out
}
