package manifest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// customCheckObjects reads the objects the i-th custom check selects: those
// its resourceSelector names (one missing is not ready), then those of its
// labelSelector (none matching is not ready: a check on nothing proves
// nothing).
func customCheckObjects(ctx context.Context, c *clusterClient, i int, chk manifestv1alpha2.CustomReadinessCheck) (objs []*unstructured.Unstructured, notReady string, err error) {
	field := fmt.Sprintf("spec.config.readinessChecks.custom[%d]", i)
	for k, r := range chk.Resource {
		cur := &unstructured.Unstructured{}
		cur.SetAPIVersion(r.APIVersion)
		cur.SetKind(r.Kind)
		if err := needsNamespace(c, cur, r, fmt.Sprintf("%s.resourceSelector[%d]", field, k), ReasonReadinessInvalid); err != nil {
			return nil, "", err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, cur); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("custom readiness check %q: %s not found", chk.Name, refString(r)), nil
			}
			return nil, "", classify(field, cur, "reading", err)
		}
		objs = append(objs, cur)
	}
	ls := chk.LabelSelector
	if ls == nil {
		return objs, "", nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(ls.APIVersion)
	list.SetKind(ls.Kind + "List")
	if err := c.List(ctx, list, client.MatchingLabels(ls.Labels)); err != nil {
		probe := &unstructured.Unstructured{}
		probe.SetAPIVersion(ls.APIVersion)
		probe.SetKind(ls.Kind)
		return nil, "", classify(field+".labelSelector", probe, "listing", err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Sprintf("custom readiness check %q: no %s (%s) with labels %s yet", chk.Name, ls.Kind, ls.APIVersion, labelText(ls.Labels)), nil
	}
	for k := range list.Items {
		objs = append(objs, &list.Items[k])
	}
	return objs, "", nil
}

// meetsRequirements reports what of the i-th custom check cur does not meet.
func meetsRequirements(i int, chk manifestv1alpha2.CustomReadinessCheck, cur *unstructured.Unstructured) (notReady string, err error) {
	for j, req := range chk.Requirements {
		ok, err := checkRequirement(cur.Object, req)
		if err != nil {
			return "", lib.ConfigError(ReasonReadinessInvalid, "spec.config.readinessChecks.custom[%d].requirements[%d]: %v", i, j, err)
		}
		if !ok {
			return fmt.Sprintf("custom readiness check %q: %s: %s %s %v not met", chk.Name, refString(ref(cur)), req.JSONPath, req.Operator, req.Values), nil
		}
	}
	return "", nil
}

func labelText(labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}
