package helm

import (
	"context"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// PullWithPullSecrets pulls the OCI chart ref for item with a fresh chart
// source, the item's Context naming the given registry pull secrets.
func PullWithPullSecrets(ctx context.Context, c client.Client, opts ChartSourceOptions, item *lsv1alpha1.DeployItem, pullSecrets []string, ref string) (*chart.Chart, error) {
	cs, err := newChartSource(opts, c, c)
	if err != nil {
		return nil, err
	}
	creds, err := cs.credentialsOf(ctx, item)
	if err != nil {
		return nil, err
	}
	creds.pullSecrets = pullSecrets
	return cs.pull(ctx, creds, ref)
}
