package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// valueString renders a value for comparison: strings as they are, anything
// else as JSON.
func valueString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkRequirement reports whether obj meets req.
func checkRequirement(obj map[string]any, req manifestv1alpha2.ReadinessRequirement) (bool, error) {
	v, found, err := lib.JSONPathValue(obj, req.JSONPath)
	if err != nil {
		return false, fmt.Errorf("jsonPath %q: %w", req.JSONPath, err)
	}
	s := valueString(v)
	switch req.Operator {
	case manifestv1alpha2.ReadinessOperatorExists:
		return found, nil
	case manifestv1alpha2.ReadinessOperatorNotExists:
		return !found, nil
	case manifestv1alpha2.ReadinessOperatorEquals, manifestv1alpha2.ReadinessOperatorNotEquals:
		if len(req.Values) != 1 {
			return false, fmt.Errorf("operator %s needs exactly one value", req.Operator)
		}
		eq := found && s == req.Values[0]
		return eq == (req.Operator == manifestv1alpha2.ReadinessOperatorEquals), nil
	case manifestv1alpha2.ReadinessOperatorIn:
		return found && slices.Contains(req.Values, s), nil
	case manifestv1alpha2.ReadinessOperatorNotIn:
		return !found || !slices.Contains(req.Values, s), nil
	}
	return false, fmt.Errorf("operator %q is not one of exists, notExists, ==, !=, in, notIn", req.Operator)
}

// validateReadiness checks the custom checks' shape before anything is applied.
func validateReadiness(rc manifestv1alpha2.ReadinessCheckConfiguration) error {
	for i, c := range rc.CustomReadinessChecks {
		field := fmt.Sprintf("spec.config.readinessChecks.custom[%d]", i)
		if len(c.Resource) == 0 && c.LabelSelector == nil {
			return lib.ConfigError(ReasonReadinessInvalid, "%s.resourceSelector: must name at least one object (or set labelSelector)", field)
		}
		if ls := c.LabelSelector; ls != nil && (ls.APIVersion == "" || ls.Kind == "" || len(ls.Labels) == 0) {
			return lib.ConfigError(ReasonReadinessInvalid, "%s.labelSelector: apiVersion, kind and matchLabels must be set", field)
		}
		for j, r := range c.Requirements {
			if _, err := checkRequirement(map[string]any{}, r); err != nil {
				return lib.ConfigError(ReasonReadinessInvalid, "%s.requirements[%d]: %v", field, j, err)
			}
		}
	}
	return nil
}

// defaultReady reports whether a workload is ready, with a reason when not.
// Only the kinds the brief names are checked; everything else is ready once applied.
func defaultReady(obj *unstructured.Unstructured) (bool, string) {
	gvk := obj.GroupVersionKind()
	o := obj.Object
	i64 := func(path ...string) int64 {
		v, _, _ := unstructured.NestedFieldNoCopy(o, path...)
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
		return 0
	}
	replicas := func() int64 {
		if _, found, _ := unstructured.NestedFieldNoCopy(o, "spec", "replicas"); found {
			return i64("spec", "replicas")
		}
		return 1
	}
	generationSeen := i64("status", "observedGeneration") >= obj.GetGeneration()
	switch {
	case gvk.Group == "apps" && gvk.Kind == "Deployment":
		r := replicas()
		if !generationSeen || i64("status", "updatedReplicas") < r || i64("status", "availableReplicas") < r || i64("status", "replicas") > r {
			return false, fmt.Sprintf("%d of %d replicas updated and available", min(i64("status", "updatedReplicas"), i64("status", "availableReplicas")), r)
		}
	case gvk.Group == "apps" && gvk.Kind == "StatefulSet":
		r := replicas()
		if !generationSeen || i64("status", "readyReplicas") < r || i64("status", "updatedReplicas") < r {
			return false, fmt.Sprintf("%d of %d replicas ready", i64("status", "readyReplicas"), r)
		}
	case gvk.Group == "apps" && gvk.Kind == "DaemonSet":
		want := i64("status", "desiredNumberScheduled")
		if !generationSeen || i64("status", "numberReady") < want || i64("status", "updatedNumberScheduled") < want {
			return false, fmt.Sprintf("%d of %d pods ready", i64("status", "numberReady"), want)
		}
	case gvk.Group == "batch" && gvk.Kind == "Job":
		if hasCondition(o, "Complete") {
			return true, ""
		}
		return false, "job not complete"
	case gvk.Group == "" && gvk.Kind == "Pod":
		phase, _, _ := unstructured.NestedString(o, "status", "phase")
		if phase == "Succeeded" || (phase == "Running" && hasCondition(o, "Ready")) {
			return true, ""
		}
		return false, "pod phase " + phase
	}
	return true, ""
}

// isWorkload reports whether the default readiness check covers a kind.
func isWorkload(gvk schema.GroupVersionKind) bool {
	switch gvk.Group + "/" + gvk.Kind {
	case "apps/Deployment", "apps/StatefulSet", "apps/DaemonSet", "batch/Job", "/Pod":
		return true
	}
	return false
}

func hasCondition(o map[string]any, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(o, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// failedWorkload reports workloads that can never become ready (a failed Job or Pod).
func failedWorkload(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == "batch" && gvk.Kind == "Job":
		return hasCondition(obj.Object, "Failed")
	case gvk.Group == "" && gvk.Kind == "Pod":
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		return phase == "Failed"
	}
	return false
}

// checkReadiness re-reads the applied objects and reports the first one not
// ready ("" when everything is ready).
func (d *deployer) checkReadiness(ctx context.Context, c *clusterClient, cfg *config, applied []*unstructured.Unstructured) (string, error) {
	rc := cfg.spec.ReadinessChecks
	if !rc.DisableDefault {
		for _, a := range applied {
			gvk := a.GroupVersionKind()
			if !isWorkload(gvk) {
				continue
			}
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(gvk)
			if err := c.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
				return "", classify("readiness", a, "reading", err)
			}
			if failedWorkload(cur) {
				return "", lib.ConfigError(ReasonNotReady, "%s failed and will not become ready", refString(ref(cur)))
			}
			if ok, why := defaultReady(cur); !ok {
				return fmt.Sprintf("%s not ready: %s", refString(ref(cur)), why), nil
			}
		}
	}
	for i, chk := range rc.CustomReadinessChecks {
		objs, notReady, err := customCheckObjects(ctx, c, i, chk)
		if err != nil || notReady != "" {
			return notReady, err
		}
		for _, cur := range objs {
			if notReady, err := meetsRequirements(i, chk, cur); err != nil || notReady != "" {
				return notReady, err
			}
		}
	}
	return "", nil
}

// needsNamespace fails a reference to an object of a namespaced kind that
// names no namespace (a configuration problem, reported at once): a
// reference names one object exactly (Landscaper: "a resource is uniquely
// defined by its GVK, namespace and name"), so it is not defaulted as a
// manifest's namespace is; reading it would only find nothing until the
// item's timeout. Only a reference without a namespace asks the REST mapper
// (cached); a kind the target does not serve is reported as when reading.
func needsNamespace(c *clusterClient, obj *unstructured.Unstructured, r manifestv1alpha2.TypedObjectReference, field, reason string) error {
	if r.Namespace != "" {
		return nil
	}
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return classify(field, obj, "mapping", err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return lib.ConfigError(reason, "%s: %s %s (%s) is namespaced: set its namespace", field, r.Kind, r.Name, r.APIVersion)
	}
	return nil
}
