package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// registryAddress is the local environment's OCI registry.
func registryAddress() string {
	if addr := os.Getenv(RegistryEnv); addr != "" {
		return addr
	}
	raw, err := os.ReadFile(filepath.Join(env.LocalDir, "registry", "address"))
	Expect(err).NotTo(HaveOccurred(), "the local environment's registry address")
	return strings.TrimSpace(string(raw))
}

// pushComponent runs `terrace component push` for a constructor file or a
// component archive directory (path relative to the repository root).
func pushComponent(ctx context.Context, repo, path string) {
	cmd := exec.CommandContext(ctx, filepath.Join(env.Root, "bin", "terrace"), "component", "push", "--plain-http", "--repo", repo, //nolint:gosec // the project's own CLI
		filepath.Join(env.Root, path))
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "terrace component push %s: %s", path, out)
}

// componentContext creates the Context "components" in ns naming repo as
// the repository of component versions.
func componentContext(ctx context.Context, ns, repo string) {
	applyYAML(ctx, ns, fmt.Appendf(nil, `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Context
metadata:
  name: components
repositoryContext:
  type: OCIRegistry
  baseUrl: %s
`, repo))
}

var _ = Describe("Component versions", func() {
	BeforeEach(func() {
		if !hasRegistry() {
			Skip("needs the local environment's OCI registry (or " + RegistryEnv + ")")
		}
	})

	It("installs a component archive as Landscaper publishes them, pushed with terrace component push", func(ctx SpecContext) {
		ns := newNamespace(ctx, "archive")
		repo := registryAddress() + "/e2e/" + ns
		pushComponent(ctx, repo, "e2e/suite/testdata/component-archive")
		componentContext(ctx, ns, repo)
		root := applyYAML(ctx, ns, []byte(`apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata:
  name: echo
  annotations:
    landscaper.gardener.cloud/operation: reconcile
spec:
  context: components
  componentDescriptor:
    ref:
      componentName: example.terrace.dev/e2e/echo
      version: v0.2.0
  blueprint:
    ref:
      resourceName: echo-blueprint
  exports:
    data:
    - name: message
      dataRef: echo-message
`))[0]
		deleteAndWait(root)
		Eventually(installationJob(ctx, ns, root.GetName())).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		do := &lsv1alpha1.DataObject{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "echo-message"}, do)).To(Succeed())
		Expect(string(do.Data.RawMessage)).To(Equal(`"echo from example.terrace.dev/e2e/echo:v0.2.0"`))
	})

	It("deploys the example component's chart by chart.resourceRef, pushed from a constructor", func(ctx SpecContext) {
		ns := newNamespace(ctx, "component")
		createTarget(ctx, ns, "local-cluster", clusterKubeconfig(ctx, ns))
		repo := registryAddress() + "/e2e/" + ns
		pushComponent(ctx, repo, "examples/component-landscape/component-constructor.yaml")
		componentContext(ctx, ns, repo)
		DeferCleanup(func(ctx SpecContext) {
			release := &corev1.Namespace{}
			release.Name = "greeter-cv"
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, release))).To(Succeed())
		})
		root := applyFile(ctx, ns, "examples/component-landscape/installation.yaml")[0]
		deleteAndWait(root)
		Eventually(installationJob(ctx, ns, root.GetName())).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })

		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "greeter-cv", Name: "greeter-cv-greeting"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello from a component version"))
		for name, want := range map[string]string{"greeter-landscape-greeting": `"hello from a component version"`, "greeter-landscape-chart-version": `"0.1.0"`,
			"greeter-landscape-image": `"registry.example/terrace/greeter:1.0.0"`} {
			do := &lsv1alpha1.DataObject{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, do)).To(Succeed(), name)
			Expect(string(do.Data.RawMessage)).To(Equal(want), name)
		}

		By("deleting the installation uninstalls the release")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(root).Should(BeTrue(), func() string { return describe(ctx, ns) })
		Eventually(configMapGone(ctx, "greeter-cv", "greeter-cv-greeting")).WithContext(ctx).Should(BeTrue())
	})
})
