package helm_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/registrytest"
	"github.com/terrace-dev/terrace/kit/testenv"
)

var env *testenv.Env

// The deployer may reach the test API server and the test registry, both
// on 127.0.0.1. It serves Targets without an environment annotation: tests
// with a deployer of their own fence their Targets off.
func TestMain(m *testing.M) {
	os.Exit(testutil.RunMain(m, &env, func(mgr ctrl.Manager) error {
		sel, err := lib.ParseTargetSelector("!"+lsv1alpha1.EnvironmentAnnotation, "")
		if err != nil {
			return err
		}
		return helm.AddToManager(mgr, helm.Options{Identity: "helm-id", Version: "test", TargetSelector: sel,
			// Short enough for TestContinuousReconcileRepairsDrift.
			MinContinuousReconcileInterval: time.Second,
			TargetClients:                  lib.TargetClientOptions{AllowLoopback: true},
			Charts:                         helm.ChartSourceOptions{AllowLoopback: true}})
	}))
}

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

// chartArchive builds a chart "demo" of one ConfigMap whose data.greeting
// is .Values.greeting, as a .tgz.
func chartArchive(t *testing.T) []byte {
	t.Helper()
	return chartArchiveWith(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
`)
}

// chartArchiveWith builds the demo chart with the given ConfigMap template.
func chartArchiveWith(t *testing.T, template string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "demo", Version: "0.1.0"},
		Values:    map[string]any{"greeting": "default"},
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(template)}},
	}
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

// pushChart pushes the demo chart to a fresh in-process registry and
// returns its reference.
func pushChart(t *testing.T) string {
	t.Helper()
	ref := registrytest.Start(t) + "/charts/demo:0.1.0"
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(chartArchive(t), ref); err != nil {
		t.Fatalf("pushing the chart: %v", err)
	}
	return ref
}

// target creates a kubernetes-cluster Target pointing at the test API server.
func target(g *WithT, ns string) {
	cfg, err := json.Marshal(map[string]string{"kubeconfig": string(env.KubeConfig)})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	})).To(Succeed())
}

// providerConfig renders a ProviderConfiguration around the given fields.
func providerConfig(fields map[string]any) []byte {
	fields["apiVersion"] = "helm.deployer.landscaper.gardener.cloud/v1alpha1"
	fields["kind"] = "ProviderConfiguration"
	raw, _ := json.Marshal(fields)
	return raw
}

func createItem(g *WithT, ns, name string, config []byte) *lsv1alpha1.DeployItem {
	di := &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lsv1alpha1.DeployItemSpec{
			Type:   helm.Type,
			Target: &lsv1alpha1.ObjectReference{Name: "t"},
			Config: &runtime.RawExtension{Raw: config},
		},
	}
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	return di
}

func get(g *WithT, di *lsv1alpha1.DeployItem) func() *lsv1alpha1.DeployItem {
	return func() *lsv1alpha1.DeployItem {
		out := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(di), out)).To(Succeed())
		return out
	}
}

func finishedIn(p lsv1alpha1.Phase) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) bool {
		return di.Status.Phase == p && di.Status.JobID != "" && di.Status.JobID == di.Status.JobIDFinished &&
			di.Status.ObservedGeneration == di.Generation
	}, BeTrue())
}

func failedWith(reason, msg string) OmegaMatcher {
	return And(finishedIn(lsv1alpha1.PhaseFailed),
		WithTransform(func(di *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return di.Status.LastError },
			And(Not(BeNil()), HaveField("Reason", reason),
				HaveField("Codes", ContainElement(lsv1alpha1.ErrorConfigurationProblem)), HaveField("Message", ContainSubstring(msg)))))
}

// greeting reads data.greeting of a ConfigMap ("" while it is missing).
func greeting(g *WithT, ns, name string) func() string {
	return func() string {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			return ""
		}
		return cm.Data["greeting"]
	}
}

func secretExists(ns, name string) bool {
	return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}) == nil
}

func rawArchive(t *testing.T) map[string]any {
	return map[string]any{"archive": map[string]string{"raw": base64.StdEncoding.EncodeToString(chartArchive(t))}}
}
