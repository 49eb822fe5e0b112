package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apisall "github.com/terrace-dev/terrace/apis/all"
)

// KubeconfigEnv names the kubeconfig of an existing cluster with Terrace
// deployed (e.g. by `make e2e-kind`). It is deliberately not KUBECONFIG: a
// developer's shell often points KUBECONFIG at a real cluster, and `make test`
// must never run the suite there by accident.
const KubeconfigEnv = "E2E_KUBECONFIG"

// TargetServerEnv overrides the API server URL written into the Targets the
// suite creates for the cluster itself (deployers reach it from where they
// run: loopback for the local environment, the in-cluster Service in kind).
const TargetServerEnv = "E2E_TARGET_SERVER"

// RegistryEnv names an OCI registry (host:port, plain HTTP) that both the
// suite and the controllers of an existing cluster reach at that address; the
// self-started local environment has its own.
const RegistryEnv = "E2E_REGISTRY"

// hasRegistry reports whether the specs that push to an OCI registry can run.
func hasRegistry() bool { return env.Local() || os.Getenv(RegistryEnv) != "" }

// terraceNamespace is where the controllers' ServiceAccounts live.
const terraceNamespace = "terrace-system"

// The self-started local environment runs beside a developer's `make up`
// (.local, default ports) and `make bench` (.local/bench-env) without clashing.
var localEnvPorts = map[string]string{
	"TERRACE_ETCD_PORT":            "23379",
	"TERRACE_ETCD_PEER_PORT":       "23380",
	"TERRACE_APISERVER_PORT":       "27443",
	"TERRACE_KCM_PORT":             "20357",
	"TERRACE_CONTROLLER_PORT_BASE": "29080",
}

// binaries are Terrace's controller processes, as hack/components.sh lists them.
var binaries = []string{
	"installation-controller", "execution-controller", "manifest-deployer", "mock-deployer", "helm-deployer",
	"dt-binder", "sandbox-provisioner", "spacerequest-stub",
}

// Environment is the cluster the suite runs against: either the local
// environment it started itself (hack/local-env.sh with its own state
// directory and ports; every controller a process under its own
// ServiceAccount) or an existing cluster named by E2E_KUBECONFIG.
type Environment struct {
	Client    client.Client
	Config    *rest.Config
	Clientset kubernetes.Interface
	Scheme    *runtime.Scheme

	// Root is the repository's root directory.
	Root string
	// LocalDir is the local environment's state directory; empty for an
	// existing cluster.
	LocalDir string
	// TracesFile is where every controller of the local environment writes
	// its spans (TERRACE_TRACES_FILE); empty for an existing cluster.
	TracesFile string
	// TargetServer is the API server URL deployers use to reach this cluster.
	TargetServer string
}

// Local reports whether the suite started the environment itself (and so
// controls its processes and can read their traces and logs).
func (e *Environment) Local() bool { return e.LocalDir != "" }

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	Expect(apisall.AddToScheme(s)).To(Succeed())
	return s
}

// repoRoot finds the directory holding go.work above the working directory.
func repoRoot() string {
	dir, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		Expect(parent).NotTo(Equal(dir), "go.work not found above the working directory")
		dir = parent
	}
}

// startEnvironment connects to E2E_KUBECONFIG's cluster, or starts a fresh
// local environment.
func startEnvironment(ctx context.Context) *Environment {
	env := &Environment{Root: repoRoot(), Scheme: newScheme()}
	kubeconfig := os.Getenv(KubeconfigEnv)
	if kubeconfig == "" {
		env.LocalDir = filepath.Join(env.Root, ".local", "e2e")
		env.TracesFile = filepath.Join(env.LocalDir, "traces.jsonl")
		// A fresh start: stop what a previous, interrupted run may have
		// left behind and remove its state.
		env.localEnv(ctx, "clean")
		env.localEnv(ctx, "up")
		kubeconfig = filepath.Join(env.LocalDir, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 100, 200
	env.Config = cfg
	env.Client, err = client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	env.Clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	env.TargetServer = os.Getenv(TargetServerEnv)
	if env.TargetServer == "" {
		if env.Local() {
			env.TargetServer = cfg.Host
		} else {
			env.TargetServer = "https://kubernetes.default.svc"
		}
	}
	if !env.Local() {
		env.waitForDeployments(ctx)
	}
	return env
}

// Stop stops the local environment (its state stays in LocalDir for a look
// at the logs; the next run removes it).
func (e *Environment) Stop(ctx context.Context) {
	if e == nil || !e.Local() {
		return
	}
	e.localEnv(ctx, "down")
}

// localEnv runs hack/local-env.sh with the suite's state directory and ports,
// and tracing into TracesFile.
func (e *Environment) localEnv(ctx context.Context, command string) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Root, "hack", "local-env.sh"), command)
	cmd.Env = append(os.Environ(), "TERRACE_LOCAL_DIR="+e.LocalDir, "TERRACE_TRACES_FILE="+e.TracesFile)
	for k, v := range localEnvPorts {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Run()).To(Succeed(), "hack/local-env.sh %s", command)
}

// pid returns the process ID the local environment recorded for component.
func (e *Environment) pid(component string) int {
	data, err := os.ReadFile(filepath.Join(e.LocalDir, "pids", component+".pid"))
	Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	Expect(err).NotTo(HaveOccurred())
	return pid
}

// Kill kills a controller without warning: SIGKILL for a local process, a
// pod deletion with no grace period in a cluster. It returns when the process
// is gone.
func (e *Environment) Kill(ctx context.Context, component string) {
	if !e.Local() {
		pods := &corev1.PodList{}
		Expect(e.Client.List(ctx, pods, client.InNamespace(terraceNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": component})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for i := range pods.Items {
			Expect(client.IgnoreNotFound(e.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)))).To(Succeed())
		}
		return
	}
	pid := e.pid(component)
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	Eventually(func() bool { return processGone(pid) }).WithTimeout(10*time.Second).
		Should(BeTrue(), "%s (pid %d) still runs after SIGKILL", component, pid)
}

// processGone reports whether pid has ended (gone or a zombie).
func processGone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z'
	}
	return false
}

// Restart brings killed controllers back: `local-env.sh up` starts whatever is
// not running; in a cluster the Deployments recreate their pods.
func (e *Environment) Restart(ctx context.Context) {
	if e.Local() {
		e.localEnv(ctx, "up")
		return
	}
	e.waitForDeployments(ctx)
}

// waitForDeployments waits until every Terrace Deployment is available.
func (e *Environment) waitForDeployments(ctx context.Context) {
	for _, b := range binaries {
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: terraceNamespace, Name: b}, d)).To(Succeed())
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.AvailableReplicas).To(BeNumerically(">=", 1))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(d.Status.Replicas))
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).
			Should(Succeed(), "deployment %s/%s available", terraceNamespace, b)
	}
}

// metricsPort returns the port a local controller serves /metrics on.
func (e *Environment) metricsPort(component string) string {
	data, err := os.ReadFile(filepath.Join(e.LocalDir, "pids", component+".ports"))
	Expect(err).NotTo(HaveOccurred())
	metrics, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	return metrics
}

// logTail returns the last lines of each local controller's log.
func (e *Environment) logTail(lines int) string {
	var b strings.Builder
	for _, c := range binaries {
		data, err := os.ReadFile(filepath.Join(e.LocalDir, "logs", c+".log"))
		if err != nil {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", c, len(all), strings.Join(all, "\n"))
	}
	return b.String()
}

// isGone reports whether obj is gone from the API server.
func (e *Environment) isGone(ctx context.Context, obj client.Object) (bool, error) {
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, errors.Join(err)
}
