package testenv

import (
	"context"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AggregateClusterRoles does once what kube-controller-manager's
// clusterrole-aggregation controller does continuously: it fills the rules of
// aggregated ClusterRoles (admin, edit, view) from the ClusterRoles their
// selectors match. A bare kube-apiserver (envtest) creates the bootstrap
// roles but leaves the aggregated ones empty, so "edit" would grant nothing.
// Tests that hand out credentials bound to those roles call it after Start.
func AggregateClusterRoles(ctx context.Context, c client.Client) error {
	// Aggregated roles may select each other (edit selects view): iterate to
	// a fixed point.
	for range 5 {
		changed := false
		all := &rbacv1.ClusterRoleList{}
		if err := c.List(ctx, all); err != nil {
			return err
		}
		for i := range all.Items {
			role := &all.Items[i]
			if role.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range role.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					return fmt.Errorf("aggregation rule of %s: %w", role.Name, err)
				}
				for j := range all.Items {
					other := &all.Items[j]
					if other.Name == role.Name || !s.Matches(labels.Set(other.Labels)) {
						continue
					}
					for _, r := range other.Rules {
						if !containsRule(rules, r) {
							rules = append(rules, r)
						}
					}
				}
			}
			if reflect.DeepEqual(rules, role.Rules) || len(rules) == 0 {
				continue
			}
			role.Rules = rules
			if err := c.Update(ctx, role); err != nil {
				return fmt.Errorf("aggregating ClusterRole %s: %w", role.Name, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if reflect.DeepEqual(x, r) {
			return true
		}
	}
	return false
}
