package testenv_test

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/testenv"
)

// A bare kube-apiserver leaves the aggregated bootstrap roles empty;
// AggregateClusterRoles fills them as kube-controller-manager would.
func TestAggregateClusterRolesFillsEdit(t *testing.T) {
	ctx := context.Background()
	if err := testenv.AggregateClusterRoles(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	edit := &rbacv1.ClusterRole{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "edit"}, edit); err != nil {
		t.Fatal(err)
	}
	grantsConfigMaps := false
	for _, r := range edit.Rules {
		for _, res := range r.Resources {
			if res == "configmaps" {
				grantsConfigMaps = true
			}
		}
	}
	if !grantsConfigMaps {
		t.Fatalf("edit still grants nothing on configmaps after aggregation: %v", edit.Rules)
	}
	// Idempotent: a second run changes nothing and succeeds.
	if err := testenv.AggregateClusterRoles(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
}
