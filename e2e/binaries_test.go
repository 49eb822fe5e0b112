package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terrace-dev/terrace/kit/testenv"
)

// binaries are every controller binary `make build` puts into bin/.
var binaries = []string{
	"installation-controller",
	"execution-controller",
	"manifest-deployer",
	"mock-deployer",
	"helm-deployer",
	"dt-binder",
	"sandbox-provisioner",
	"spacerequest-stub",
}

// sharedFlags are the flags every binary takes from kit/manager.
var sharedFlags = []string{
	"--kubeconfig", "--metrics-bind-address", "--health-probe-bind-address",
	"--leader-elect", "--leader-election-id", "--leader-election-namespace",
	"--concurrency", "--kube-api-qps", "--kube-api-burst", "--log-level", "--log-format",
}

// binDir finds bin/ beside go.work; `make test` builds the binaries first.
func binDir(t testing.TB) string {
	t.Helper()
	assets, err := testenv.AssetsDir() // <root>/bin/k8s, or $KUBEBUILDER_ASSETS
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(assets)
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("binary %s not found in %s: run `make build` first (make test does)", b, dir)
		}
	}
	return dir
}

func TestEveryBinaryListsTheSharedFlags(t *testing.T) {
	dir := binDir(t)
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(dir, b), "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help failed: %v\n%s", b, err, out)
			}
			for _, f := range sharedFlags {
				if !strings.Contains(string(out), f) {
					t.Errorf("%s --help does not list %s:\n%s", b, f, out)
				}
			}
		})
	}
}

func TestEveryBinaryRejectsBadFlagsClearly(t *testing.T) {
	dir := binDir(t)
	out, err := exec.Command(filepath.Join(dir, "dt-binder"), "--log-level", "loud").CombinedOutput()
	if err == nil {
		t.Fatalf("dt-binder accepted --log-level loud:\n%s", out)
	}
	if !strings.Contains(string(out), "loud") {
		t.Fatalf("the error does not name the bad value:\n%s", out)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// TestEveryBinaryServesHealthAndMetrics starts every binary as its own process
// against one real API server and checks that each answers /healthz, /readyz
// and /metrics.
func TestEveryBinaryServesHealthAndMetrics(t *testing.T) {
	g := NewWithT(t)
	dir := binDir(t)
	env := testenv.StartT(t, nil)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, env.KubeConfig, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			g := NewWithT(t)
			health, metrics := freePort(t), freePort(t)
			cmd := exec.CommandContext(ctx, filepath.Join(dir, b),
				"--kubeconfig", kubeconfig,
				"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", health),
				"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metrics),
			)
			logFile, err := os.Create(filepath.Join(t.TempDir(), b+".log"))
			g.Expect(err).NotTo(HaveOccurred())
			cmd.Stdout, cmd.Stderr = logFile, logFile
			g.Expect(cmd.Start()).To(Succeed())
			t.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt)
				_ = cmd.Wait()
				if t.Failed() {
					log, _ := os.ReadFile(logFile.Name())
					t.Logf("%s log:\n%s", b, log)
				}
			})

			for _, url := range []string{
				fmt.Sprintf("http://127.0.0.1:%d/healthz", health),
				fmt.Sprintf("http://127.0.0.1:%d/readyz", health),
				fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics),
			} {
				g.Eventually(func() (int, error) {
					resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL built above
					if err != nil {
						return 0, err
					}
					defer func() { _ = resp.Body.Close() }()
					return resp.StatusCode, nil
				}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Equal(http.StatusOK), url)
			}
		})
	}
}
