// Package observability_test runs the installation controller, with the
// execution stub playing the execution controller, in one process against a
// real API server and checks what a job leaves behind for observers: one
// trace per job, handed to every object it reaches (and no trace annotation
// at all while tracing is off), the shared Terrace metrics and the events.
// That the execution controller and the deployers continue the trace is the
// e2e suite's to check, across the real binaries.
//
// It is a test binary of its own because tracing.Install is process-global:
// the tests here switch tracing on and off, one test at a time, without
// disturbing the controller tests of package installation.
package observability_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/installation-controller/internal/executionstub"
	"github.com/terrace-dev/terrace/kit/app"
	"github.com/terrace-dev/terrace/kit/manager"
	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/kit/tracing"
)

var (
	env    *testenv.Env
	scheme *runtime.Scheme
	nsSeq  atomic.Int64
)

const (
	timeout  = 60 * time.Second
	interval = 50 * time.Millisecond
)

// TestMain starts one API server and one manager running the installation
// controller and the execution stub for the whole package; the manager stops
// before the API server.
func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		ctrl.SetLogger(crzap.New(crzap.UseDevMode(true)))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if scheme, err = app.Scheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env, err = testenv.Start(scheme); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		}
	}()
	// Tracing is off unless a test switches it on.
	tracing.Install(nil)

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2*manager.DefaultKubeAPIQPS, 2*manager.DefaultKubeAPIBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             manager.Options{Concurrency: 4}.ControllerConfig(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "manager did not stop within 30s")
		}
	}
	for _, add := range []func() error{
		func() error { return installation.AddToManager(ctx, mgr, installation.Options{}) },
		func() error { return executionstub.AddToManager(mgr) },
	} {
		if err := add(); err != nil {
			cancel()
			fmt.Fprintln(os.Stderr, "registering controllers:", err)
			return 1
		}
	}
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		stop()
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	code := m.Run()
	stop()
	return code
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("o%d-%s", nsSeq.Add(1), strings.ToLower(t.Name()))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns = strings.TrimRight(ns, "-")
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// treeBlueprint is a root with two sub-installations, a and b (b imports a's
// export), and a deploy item of its own; every installation's execution has
// one mock item (itemConfig: extra lines of b's item configuration).
func treeBlueprint(bItemConfig string) map[string]string {
	item := func(name, extra string) string {
		return `    deployItems:
    - name: ` + name + `
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
` + extra
	}
	return map[string]string{
		"blueprint.yaml": `subinstallations:
- name: a
  blueprint:
    dir: a
  exports:
    data:
    - name: endpoint
      dataRef: a-endpoint
- name: b
  blueprint:
    dir: b
  imports:
    data:
    - name: endpoint
      dataRef: a-endpoint
deployExecutions:
- name: own
  type: GoTemplate
  template: |
` + item("own", ""),
		"a/blueprint.yaml": `exports:
- name: endpoint
  type: data
deployExecutions:
- name: deploy
  type: GoTemplate
  template: |
` + item("server", "        export:\n          host: a.example.com\n") + `exportExecutions:
- name: export
  type: GoTemplate
  template: |
    exports:
      endpoint: https://{{ .values.deployitems.server.host }}
`,
		"b/blueprint.yaml": `imports:
- name: endpoint
  type: data
deployExecutions:
- name: deploy
  type: GoTemplate
  template: |
` + item("client", bItemConfig),
	}
}

// The objects a tree job runs through.
var (
	treeInstallations = []string{"root", "root-a", "root-b"}
	treeExecutions    = []string{"root", "root-a", "root-b"}
)

func newRoot(ns, name string, fs map[string]string) *lsv1alpha1.Installation {
	return &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: fs}}},
	}
}

func getInst(g Gomega, ns, name string) *lsv1alpha1.Installation {
	inst := &lsv1alpha1.Installation{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, inst)).To(Succeed())
	return inst
}

// waitFinished waits until the installation finished a job in phase p and
// returns it.
func waitFinished(t *testing.T, ns, name string, p lsv1alpha1.Phase) *lsv1alpha1.Installation {
	t.Helper()
	var inst *lsv1alpha1.Installation
	NewWithT(t).Eventually(func(g Gomega) {
		inst = getInst(g, ns, name)
		g.Expect(inst.Status.JobID).NotTo(BeEmpty())
		g.Expect(inst.Status.JobIDFinished).To(Equal(inst.Status.JobID))
		g.Expect(inst.Status.Phase).To(Equal(p), "lastError: %+v", inst.Status.LastError)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return inst
}

// waitGone waits until the installation is deleted.
func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &lsv1alpha1.Installation{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// watchClient is a client of the test's API server that can watch.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return wc
}
