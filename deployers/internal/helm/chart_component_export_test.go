package helm

import (
	"context"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ChartFromResourceKeyFor reads the chart a resource key names for item
// with a fresh chart source and the credentials of the item's Context.
func ChartFromResourceKeyFor(ctx context.Context, c client.Client, opts ChartSourceOptions, item *lsv1alpha1.DeployItem, key string) (*chart.Chart, error) {
	cs, err := newChartSource(opts, c, c)
	if err != nil {
		return nil, err
	}
	creds, err := cs.credentialsOf(ctx, item)
	if err != nil {
		return nil, err
	}
	return cs.fromResourceKey(ctx, creds, key)
}
