package helm

import (
	"context"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// PullFor pulls the OCI chart ref for item with a fresh chart source and
// the credentials of the item's Context.
func PullFor(ctx context.Context, c client.Client, opts ChartSourceOptions, item *lsv1alpha1.DeployItem, ref string) (*chart.Chart, error) {
	cs, err := newChartSource(opts, c, c)
	if err != nil {
		return nil, err
	}
	creds, err := cs.credentialsOf(ctx, item)
	if err != nil {
		return nil, err
	}
	return cs.pull(ctx, creds, ref)
}

// NewReleaseSecrets is the deployer's release storage driver on secrets,
// the Secrets of namespace, with the default bound of a record.
func NewReleaseSecrets(secrets corev1client.SecretInterface, namespace string) driver.Driver {
	return newReleaseSecrets(secrets, namespace, DefaultMaxReleaseRecordBytes, func(string, ...any) {})
}

// RecordBomb is the data of a release record whose JSON inflates to
// inflated bytes.
func RecordBomb(t testing.TB, inflated int) []byte { return recordBomb(t, inflated) }
