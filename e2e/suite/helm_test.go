package suite

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// pushExampleChart pushes examples/helm-chart/chart into the local
// environment's registry with the terrace CLI, as a user would, and returns
// the chart's reference.
func pushExampleChart(ctx context.Context, repo string) string {
	ref := registryAddress() + "/" + repo
	cmd := exec.CommandContext(ctx, filepath.Join(env.Root, "bin", "terrace"), "chart", "push", "--plain-http", //nolint:gosec // the project's own CLI
		filepath.Join(env.Root, "examples", "helm-chart", "chart"), ref)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "terrace chart push: %s", out)
	return ref + ":0.1.0"
}

// documentedHelmItem is the helm provider configuration of Landscaper's helm
// deployer documentation, field for field (chart.ref, helmDeployment,
// helmDeploymentConfig, name, namespace, createNamespace, values, exports),
// pointing at the example chart.
func documentedHelmItem(ref, releaseNamespace string) string {
	return fmt.Sprintf(`- name: my-nginx
  type: landscaper.gardener.cloud/helm
  target:
    import: cluster
  config:
    apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    chart:
      ref: %s
    updateStrategy: update
    helmDeployment: true
    helmDeploymentConfig:
      install:
        atomic: true
        timeout: 10m
      upgrade:
        atomic: true
        timeout: 10m
      uninstall:
        timeout: 15m
    name: my-release
    namespace: %s
    createNamespace: true
    values:
      greeting: hello from a documented item
      port: 8080
    exports:
      defaultTimeout: 5m
      exports:
      - key: KeyA
        jsonPath: .Values.greeting
`, ref, releaseNamespace)
}

var _ = Describe("Helm deployer", func() {
	It("deploys the documented helm provider configuration from the local registry, exports, and uninstalls", func(ctx SpecContext) {
		if !hasRegistry() {
			Skip("needs the local environment's OCI registry (or " + RegistryEnv + ")")
		}
		ns := newNamespace(ctx, "helm")
		releaseNS := ns + "-release"
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		ref := pushExampleChart(ctx, "e2e/charts/greeter")

		inst := fmt.Appendf(nil, `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata:
  name: chart
  annotations:
    landscaper.gardener.cloud/operation: reconcile
spec:
  imports:
    targets:
    - name: cluster
      target: cluster
  exports:
    data:
    - name: greeting
      dataRef: greeting
  blueprint:
    inline:
      filesystem:
        blueprint.yaml: |
          imports:
          - name: cluster
            type: target
            targetType: landscaper.gardener.cloud/kubernetes-cluster
          exports:
          - name: greeting
            type: data
            schema: {type: string}
          deployExecutions:
          - name: default
            type: GoTemplate
            template: |
              deployItems:
%s          exportExecutions:
          - name: exports
            type: GoTemplate
            template: |
              exports:
                greeting: {{ index .values.deployitems "my-nginx" "KeyA" | quote }}
`, indent(documentedHelmItem(ref, releaseNS), 14))
		root := applyYAML(ctx, ns, inst)[0]
		DeferCleanup(func(ctx SpecContext) {
			release := &corev1.Namespace{}
			release.Name = releaseNS
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, release))).To(Succeed())
		})
		deleteAndWait(root)

		Eventually(installationJob(ctx, ns, root.GetName())).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })

		By("the release's objects are on the cluster, in the namespace Helm created")
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "my-release-greeting"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello from a documented item"))
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "my-release"}, &corev1.Service{})).To(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "my-release"}, &corev1.ServiceAccount{})).To(Succeed())
		secrets := &corev1.SecretList{}
		Expect(env.Client.List(ctx, secrets, client.InNamespace(releaseNS), client.MatchingLabels{"owner": "helm", "name": "my-release"})).To(Succeed())
		Expect(secrets.Items).To(HaveLen(1), "one Helm release record")

		By("the item's export reaches the installation's export")
		do := &lsv1alpha1.DataObject{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "greeting"}, do)).To(Succeed())
		Expect(string(do.Data.RawMessage)).To(Equal(`"hello from a documented item"`))

		By("deleting the installation uninstalls the release")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(root).Should(BeTrue(), func() string { return describe(ctx, ns) })
		Eventually(configMapGone(ctx, releaseNS, "my-release-greeting")).WithContext(ctx).Should(BeTrue())
		Expect(env.Client.List(ctx, secrets, client.InNamespace(releaseNS), client.MatchingLabels{"owner": "helm"})).To(Succeed())
		Expect(secrets.Items).To(BeEmpty(), "uninstalled releases leave no record")
	})
})
