package helm_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
)

// testRelease is revision version of release name with a chart, values,
// a manifest and a custom label.
func testRelease(name, ns string, version int, status release.Status) *release.Release {
	return &release.Release{
		Name: name, Namespace: ns, Version: version,
		Info: &release.Info{Status: status, Description: "test", FirstDeployed: testTime(), LastDeployed: testTime()},
		Chart: &chart.Chart{
			Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "demo", Version: "0.1.0"},
			Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}},
			Values:    map[string]any{"greeting": "default"},
		},
		Config:   map[string]any{"greeting": "hello"},
		Manifest: "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo-cm\n",
		Labels:   map[string]string{"team": "blue"},
	}
}

func testTime() helmtime.Time {
	return helmtime.Time{Time: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// TestReleaseRecordsInteroperateWithHelm writes release records with the
// deployer's driver and reads them with Helm's Secret driver, and the other
// way round: the helm CLI and the deployer share releases.
func TestReleaseRecordsInteroperateWithHelm(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ours, helms := helm.NewReleaseSecrets(cs.CoreV1().Secrets(ns), ns), driver.NewSecrets(cs.CoreV1().Secrets(ns))

	// Ours writes, Helm reads: revision 1 created, then marked superseded.
	v1 := testRelease("shared", ns, 1, release.StatusDeployed)
	g.Expect(ours.Create("sh.helm.release.v1.shared.v1", v1)).To(Succeed())
	got, err := helms.Get("sh.helm.release.v1.shared.v1")
	g.Expect(err).NotTo(HaveOccurred())
	expectSameRelease(g, got, v1)
	g.Expect(got.Labels).To(Equal(map[string]string{"team": "blue"}))
	sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1.shared.v1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sec.Labels).To(HaveKey("createdAt"))
	v1.Info.Status = release.StatusSuperseded
	g.Expect(ours.Update("sh.helm.release.v1.shared.v1", v1)).To(Succeed())
	got, err = helms.Get("sh.helm.release.v1.shared.v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Info.Status).To(Equal(release.StatusSuperseded))

	// Helm writes revision 2, ours reads both by query, as Helm's history does.
	v2 := testRelease("shared", ns, 2, release.StatusDeployed)
	g.Expect(helms.Create("sh.helm.release.v1.shared.v2", v2)).To(Succeed())
	got, err = ours.Get("sh.helm.release.v1.shared.v2")
	g.Expect(err).NotTo(HaveOccurred())
	expectSameRelease(g, got, v2)
	g.Expect(got.Labels).To(Equal(map[string]string{"team": "blue"}))
	hist, err := ours.Query(map[string]string{"name": "shared", "owner": "helm"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hist).To(HaveLen(2))
	deployed, err := ours.List(func(r *release.Release) bool { return r.Info.Status == release.StatusDeployed })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deployed).To(HaveLen(1))
	g.Expect(deployed[0].Version).To(Equal(2))

	// Both Secrets have the same shape: Helm's type and labels.
	for _, name := range []string{"sh.helm.release.v1.shared.v1", "sh.helm.release.v1.shared.v2"} {
		sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sec.Type).To(Equal(corev1.SecretType("helm.sh/release.v1")))
		g.Expect(sec.Labels).To(HaveKeyWithValue("name", "shared"))
		g.Expect(sec.Labels).To(HaveKeyWithValue("owner", "helm"))
		g.Expect(sec.Labels).To(HaveKeyWithValue("team", "blue"))
		g.Expect(sec.Labels).To(HaveKey("version"))
	}

	// Ours deletes what Helm wrote; missing records are Helm's errors.
	_, err = ours.Delete("sh.helm.release.v1.shared.v2")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = helms.Get("sh.helm.release.v1.shared.v2")
	g.Expect(err).To(MatchError(driver.ErrReleaseNotFound))
	_, err = ours.Get("sh.helm.release.v1.shared.v2")
	g.Expect(err).To(MatchError(driver.ErrReleaseNotFound))
	_, err = ours.Query(map[string]string{"name": "other", "owner": "helm"})
	g.Expect(err).To(MatchError(driver.ErrReleaseNotFound))
	g.Expect(ours.Create("sh.helm.release.v1.shared.v1", v1)).To(MatchError(driver.ErrReleaseExists))
}

func expectSameRelease(g Gomega, got, want *release.Release) {
	g.ExpectWithOffset(1, got.Name).To(Equal(want.Name))
	g.ExpectWithOffset(1, got.Version).To(Equal(want.Version))
	g.ExpectWithOffset(1, got.Info.Status).To(Equal(want.Info.Status))
	g.ExpectWithOffset(1, got.Manifest).To(Equal(want.Manifest))
	g.ExpectWithOffset(1, got.Config).To(Equal(want.Config))
	g.ExpectWithOffset(1, got.Chart.Metadata).To(Equal(want.Chart.Metadata))
	g.ExpectWithOffset(1, got.Chart.Templates).To(Equal(want.Chart.Templates))
}
