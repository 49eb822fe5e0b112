// Package testenv starts a real kube-apiserver and etcd (controller-runtime
// envtest) with every Terrace CRD installed, for tests of any Terrace module.
//
// Tests run against the real API server rather than a fake client because
// Terrace relies on what only a server does: CRD schema and CEL validation,
// resourceVersion preconditions, server-side apply field ownership.
//
// The binaries come from KUBEBUILDER_ASSETS when it is set, otherwise from
// bin/k8s in the workspace root (the nearest directory above the working
// directory holding go.work), where `make build-control-plane` builds them.
//
// Per test:
//
//	env := testenv.StartT(t, scheme)
//
// Once per package (the control plane takes seconds to start):
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, scheme, &env)) }
//
// With Ginkgo, call Start in BeforeSuite and Stop in AfterSuite.
package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/terrace-dev/terrace/apis/config/crd"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// Timeouts are generous because CI machines are slow (2 cores) and a flaky
// start costs more than a slow one.
const (
	startTimeout   = 60 * time.Second
	stopTimeout    = 60 * time.Second
	crdWaitTimeout = 60 * time.Second
)

// Env is a running API server with the Terrace CRDs installed.
type Env struct {
	// Config connects as a cluster admin.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's content, for starting
	// binaries as separate processes against the same API server.
	KubeConfig []byte
	// Client is a direct (uncached) client using Scheme.
	Client client.Client
	// Scheme is the scheme Client uses.
	Scheme *runtime.Scheme
	// CRDs are the installed CRDs.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	env *envtest.Environment
}

// Start starts the control plane and installs all Terrace CRDs. A nil scheme
// means client-go's scheme (built-in Kubernetes types only). The caller must
// call Stop, or the etcd and kube-apiserver processes outlive the test.
func Start(scheme *runtime.Scheme) (*Env, error) {
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	crds, err := LoadCRDs()
	if err != nil {
		return nil, err
	}

	te := &envtest.Environment{
		Scheme:                   scheme,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
		ErrorIfCRDPathMissing:    true,
		CRDInstallOptions: envtest.CRDInstallOptions{
			CRDs:    crds,
			MaxTime: crdWaitTimeout,
		},
	}
	// USE_EXISTING_CLUSTER=true (honoured by envtest) needs no binaries.
	if os.Getenv("USE_EXISTING_CLUSTER") != "true" {
		dir, err := AssetsDir()
		if err != nil {
			return nil, err
		}
		te.BinaryAssetsDirectory = dir
	}

	cfg, err := te.Start()
	if err != nil {
		// Start may fail after launching etcd or the API server; stop
		// whatever runs so that a failed start leaks no processes.
		return nil, errors.Join(fmt.Errorf("starting test environment: %w", err), te.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating client: %w", err), te.Stop())
	}
	return &Env{
		Config:     cfg,
		KubeConfig: te.KubeConfig,
		Client:     c,
		Scheme:     scheme,
		CRDs:       te.CRDs,
		env:        te,
	}, nil
}

// StartT starts an environment for one test, fails the test if that is not
// possible, and stops the environment when the test ends.
func StartT(t testing.TB, scheme *runtime.Scheme) *Env {
	t.Helper()
	e, err := Start(scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping test environment: %v", err)
		}
	})
	return e
}

// RunMain starts one environment for a whole test binary, stores it in *env,
// runs the tests and stops the environment. It returns the exit code for
// os.Exit; a failed start or stop makes it non-zero.
func RunMain(m *testing.M, scheme *runtime.Scheme, env **Env) int {
	e, err := Start(scheme)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Stop stops the API server and etcd. It is safe to call more than once.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	te := e.env
	e.env = nil
	return te.Stop()
}

// LoadCRDs decodes every CRD embedded by the apis module (one per file). It
// fails when there are none: a test environment without the Terrace CRDs
// would only produce confusing "no matches for kind" errors later.
func LoadCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs: %w", err)
	}
	sort.Strings(files)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, name := range files {
		data, err := fs.ReadFile(crd.Bases, name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded CRD %s: %w", name, err)
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, c); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD %s: %w", name, err)
		}
		if c.Kind != "CustomResourceDefinition" || c.Name == "" {
			return nil, fmt.Errorf("embedded file %s is not a named CustomResourceDefinition (kind %q)", name, c.Kind)
		}
		crds = append(crds, c)
	}
	if len(crds) == 0 {
		return nil, errors.New("no CRDs found in github.com/terrace-dev/terrace/apis/config/crd (bases/*.yaml): generate them first")
	}
	return crds, nil
}

// AssetsDir returns the directory holding the etcd and kube-apiserver
// binaries: $KUBEBUILDER_ASSETS, else <workspace root>/bin/k8s. It fails with
// instructions when the binaries are not there.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := workspaceRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("control-plane binary %s not found in %s: run `make build-control-plane` in the repository root (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	return dir, nil
}

// workspaceRoot finds the nearest directory at or above the working directory
// that holds go.work: tests run in their package's directory, anywhere below it.
func workspaceRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the workspace root: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work found at or above %s: set KUBEBUILDER_ASSETS to the directory holding kube-apiserver and etcd, or run `make build-control-plane` in the repository root", wd)
		}
		dir = parent
	}
}
