package helm_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

// TestReleaseNameTaken: a second item naming a release another item
// installed fails, naming the release and its owner, and leaves it alone;
// deleting the second item does not uninstall the first item's release.
func TestReleaseNameTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	first := createItem(g, ns, "first", providerConfig(map[string]any{
		"chart": rawArchive(t), "name": "shared", "namespace": ns, "values": map[string]string{"greeting": "first"},
	}))
	g.Eventually(get(g, first), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	owner := get(g, first)().UID

	second := createItem(g, ns, "second", providerConfig(map[string]any{
		"chart": rawArchive(t), "name": "shared", "namespace": ns, "values": map[string]string{"greeting": "second"},
	}))
	g.Eventually(get(g, second), timeout, interval).Should(failedWith(helm.ReasonReleaseTaken,
		"spec.config.name: release "+ns+"/shared belongs to another deploy item (UID "+string(owner)+"); choose another release name or namespace"))
	g.Expect(greeting(g, ns, "shared-cm")()).To(Equal("first"))
	g.Expect(secretExists(ns, "sh.helm.release.v1.shared.v2")).To(BeFalse(), "no upgrade by the second item")

	g.Expect(env.Client.Delete(ctx, second)).To(Succeed())
	g.Eventually(func() bool { return apierrorsIsGone(ctx, second) }, timeout, interval).Should(BeTrue())
	g.Expect(greeting(g, ns, "shared-cm")()).To(Equal("first"), "the first item's release survives the second's deletion")
	g.Expect(secretExists(ns, "sh.helm.release.v1.shared.v1")).To(BeTrue())
}

// TestValuesFailTheChartSchema: values that the chart's values.schema.json
// refuses fail the item with Helm's message naming the value.
func TestValuesFailTheChartSchema(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	ch := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "strict", Version: "0.1.0"},
		Values:    map[string]any{"replicas": 1},
		Schema:    []byte(`{"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}`),
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: strict}\ndata: {replicas: {{ .Values.replicas | quote }}}\n")}},
	}
	di := createItem(g, ns, "strict", providerConfig(map[string]any{
		"chart": map[string]any{"archive": map[string]string{"raw": base64.StdEncoding.EncodeToString(saveChart(t, ch))}},
		"name":  "strict", "namespace": ns, "values": map[string]any{"replicas": "three"},
	}))
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(helm.ReasonRenderFailed, "values don't meet the specifications of the schema"))
	g.Expect(get(g, di)().Status.LastError.Message).To(ContainSubstring("replicas"))
}

// TestAtomicUpgradeRollsBack: an upgrade the API server refuses, with
// helmDeploymentConfig.upgrade.atomic, is rolled back to the last good
// revision, and the item fails saying so.
func TestAtomicUpgradeRollsBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	archive := base64.StdEncoding.EncodeToString(chartArchiveWith(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
{{- if .Values.broken }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: Not_A_Valid_Name
{{- end }}
`))
	config := func(values map[string]any) []byte {
		return providerConfig(map[string]any{
			"chart": map[string]any{"archive": map[string]string{"raw": archive}}, "name": "atomic", "namespace": ns, "values": values,
			"helmDeploymentConfig": map[string]any{"upgrade": map[string]any{"atomic": true, "timeout": "30s"}},
		})
	}
	di := createItem(g, ns, "atomic", config(map[string]any{"greeting": "one"}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))

	g.Expect(testutil.Update(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config = &runtime.RawExtension{Raw: config(map[string]any{"greeting": "two", "broken": true})}
	})).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(helm.ReasonReleaseFailed, "has been rolled back due to atomic being set"))
	g.Expect(get(g, di)().Status.LastError.Message).To(ContainSubstring(`"Not_A_Valid_Name"`))
	g.Expect(greeting(g, ns, "atomic-cm")()).To(Equal("one"), "the rollback restores revision 1's object")
	rollback := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sh.helm.release.v1.atomic.v3"}, rollback)).To(Succeed(), "revision 3 is the rollback")
	g.Expect(rollback.Labels).To(HaveKeyWithValue("status", "deployed"))
}

// TestReleaseRecordOverTheBound: a record of the item's release on the
// target that inflates past --max-release-record-bytes (default 32Mi) fails
// the item, naming the release, the Secret, the bound and the flag.
func TestReleaseRecordOverTheBound(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	g.Expect(env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.bomb.v1", Namespace: ns, Labels: map[string]string{
			"name": "bomb", "owner": "helm", "status": "deployed", "version": "1",
		}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": helm.RecordBomb(t, 64<<20)},
	})).To(Succeed())

	di := createItem(g, ns, "bomb", providerConfig(map[string]any{"chart": rawArchive(t), "name": "bomb", "namespace": ns}))
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(helm.ReasonReleaseRecordTooLarge,
		"release "+ns+"/bomb: release record Secret "+ns+"/sh.helm.release.v1.bomb.v1 decompresses to more than 32Mi (--max-release-record-bytes)"))
	g.Expect(secretExists(ns, "sh.helm.release.v1.bomb.v2")).To(BeFalse(), "no revision written over a record the deployer could not read")
}

func saveChart(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func apierrorsIsGone(ctx context.Context, di *lsv1alpha1.DeployItem) bool {
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{})
	return client.IgnoreNotFound(err) == nil && err != nil
}
