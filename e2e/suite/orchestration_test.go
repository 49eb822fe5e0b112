package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// installation renders a root installation named name whose blueprint has one
// deploy execution with the given deploy items (YAML, indented for the
// template) and imports the Target "cluster".
func installation(name, items string) []byte {
	return fmt.Appendf(nil, `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata:
  name: %s
  annotations:
    landscaper.gardener.cloud/operation: reconcile
spec:
  imports:
    targets:
    - name: cluster
      target: cluster
  blueprint:
    inline:
      filesystem:
        blueprint.yaml: |
          imports:
          - name: cluster
            type: target
            targetType: landscaper.gardener.cloud/kubernetes-cluster
          deployExecutions:
          - name: default
            type: GoTemplate
            template: |
              deployItems:
%s`, name, indent(items, 14))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// configMapItem is a manifest deploy item creating ConfigMap ns/name.
func configMapItem(item, ns, name string, dependsOn ...string) string {
	deps := ""
	if len(dependsOn) > 0 {
		deps = fmt.Sprintf("dependsOn: [%s]\n  ", strings.Join(dependsOn, ", "))
	}
	return fmt.Sprintf(`- name: %s
  type: landscaper.gardener.cloud/kubernetes-manifest
  %starget:
    import: cluster
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    manifests:
    - policy: manage
      manifest:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: %s, namespace: %s}
        data: {created-by: terrace-e2e}
`, item, deps, name, ns)
}

// mockItem is a mock deploy item; config is the mock's provider configuration
// beyond apiVersion and kind (e.g. "phase: Progressing").
func mockItem(item, config string) string {
	return fmt.Sprintf(`- name: %s
  type: landscaper.gardener.cloud/mock
  config:
    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
%s`, item, indent(config, 4))
}

// createInstallation applies a root installation and deletes it (waiting for
// its finalizers) when the spec ends.
func createInstallation(ctx context.Context, ns string, data []byte) *lsv1alpha1.Installation {
	objs := applyYAML(ctx, ns, data)
	Expect(objs).To(HaveLen(1))
	inst := &lsv1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objs[0].GetName()}}
	deleteAndWait(inst)
	return inst
}

func annotate(ctx context.Context, obj client.Object, key, value string) {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	Expect(env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

var _ = Describe("Deploy items (seed 001)", func() {
	It("creates namespace foo for the seed's item and deletes it with the item", func(ctx SpecContext) {
		// The seed's item lives in "default" and names Target my-target.
		createTarget(ctx, "default", "my-target", clusterKubeconfig(ctx, "default"))
		objs := applyFile(ctx, "", "examples/seeds/001-deployitem.yaml")
		Expect(objs).To(HaveLen(1))
		di := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "manifest-di"}}
		deleteAndWait(di)

		Eventually(deployItemPhase(ctx, "default", "manifest-di")).WithContext(ctx).Should(Equal(lsv1alpha1.PhaseSucceeded))
		foo := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foo), foo)).To(Succeed())
		Expect(foo.DeletionTimestamp).To(BeNil())

		By("deleting the item: namespace foo is deleted (kube-controller-manager finishes it)")
		Expect(env.Client.Delete(ctx, di)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(di).Should(BeTrue())
		Eventually(env.isGone).WithContext(ctx).WithArguments(foo).Should(BeTrue())
	})
})

// remoteCluster is a second API server acting as the cluster a landscape
// deploys to: a separate control plane for the local environment; for an
// existing cluster (kind), the same cluster, reached as deployers reach it.
func remoteCluster(ctx context.Context, ns string) (kubeconfig []byte, c client.Client) {
	if !env.Local() {
		return clusterKubeconfig(ctx, ns), env.Client
	}
	remote, err := testenv.Start(nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(remote.Stop()).To(Succeed()) })
	return remote.KubeConfig, remote.Client
}

// landscapeYAML is examples/landscape/installation.yaml with the namespace it
// deploys to renamed, so that specs do not share it.
func landscapeYAML(appNamespace string) []byte {
	data, err := os.ReadFile(filepath.Join(env.Root, "examples", "landscape", "installation.yaml"))
	Expect(err).NotTo(HaveOccurred())
	return []byte(strings.NewReplacer(
		"name: landscape-app\n", "name: "+appNamespace+"\n",
		"namespace: landscape-app\n", "namespace: "+appNamespace+"\n",
		".landscape-app.svc", "."+appNamespace+".svc",
	).Replace(string(data)))
}

var _ = Describe("Installations", func() {
	It("runs the landscape's root job through sub-installations into a remote cluster, exports flowing to the successor", func(ctx SpecContext) {
		ns := newNamespace(ctx, "landscape")
		kubeconfig, remote := remoteCluster(ctx, ns)
		createTarget(ctx, ns, "local-cluster", kubeconfig)
		appNS := ns + "-app"
		root := createInstallation(ctx, ns, landscapeYAML(appNS))

		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })

		By("the sub-installations finished the same job")
		subs := &lsv1alpha1.InstallationList{}
		Expect(env.Client.List(ctx, subs, client.InNamespace(ns), client.MatchingLabels{lsv1alpha1.EncompassedByLabel: root.Name})).To(Succeed())
		Expect(subs.Items).To(HaveLen(2))
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
		for _, s := range subs.Items {
			Expect(s.Status.Phase).To(Equal(lsv1alpha1.PhaseSucceeded), s.Name)
			Expect(s.Status.JobIDFinished).To(Equal(root.Status.JobID), s.Name)
		}

		By("the manifests are in the remote cluster, carrying the database's export (app is database's successor)")
		cm := &corev1.ConfigMap{}
		Expect(remote.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "app-config"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("DATABASE_URL", "postgres://db."+appNS+".svc:5432/app"))
		if env.Local() {
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: appNS}, &corev1.Namespace{})).
				NotTo(Succeed(), "the app namespace exists only in the remote cluster")
		}

		By("the root exports the app's URL")
		export := &lsv1alpha1.DataObject{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "landscape-app-url"}, export)).To(Succeed())
		Expect(string(export.Data.RawMessage)).To(Equal(fmt.Sprintf("%q", "http://app."+appNS+".svc")))

		By("deleting the root: the tree goes and the manifests are removed from the remote cluster")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(root).Should(BeTrue(), func() string { return describe(ctx, ns) })
		Eventually(func() bool {
			gone := &corev1.ConfigMap{}
			err := remote.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "app-config"}, gone)
			return client.IgnoreNotFound(err) == nil && err != nil
		}).WithContext(ctx).Should(BeTrue(), "app-config is deleted in the remote cluster")
	})

	It("deploys into a namespace obtained through a DeploymentTargetClaim, with only the claim's credentials", func(ctx SpecContext) {
		ns := newNamespace(ctx, "claimed")
		applyFile(ctx, "", "examples/seeds/004-step0-deploymenttargetclass.yaml")
		claim := applyFile(ctx, ns, "examples/provisioned-namespace/claim.yaml")[0]
		deleteAndWait(&appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim.GetName()}})
		p := waitBound(ctx, ns, claim.GetName())

		// The Target is the claim's Secret itself: nothing else grants access.
		target := &lsv1alpha1.Target{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-env"},
			Spec: lsv1alpha1.TargetSpec{
				Type: "landscaper.gardener.cloud/kubernetes-cluster",
				SecretRef: &lsv1alpha1.LocalSecretReference{
					Name: p.target.Spec.KubernetesClusterCredentials.ClusterCredentialsSecret,
					Key:  toolchainv1alpha1.AdminKubeconfigKey,
				},
			},
		}
		Expect(env.Client.Create(ctx, target)).To(Succeed())
		dataObject := func(name, value string) {
			Expect(env.Client.Create(ctx, &lsv1alpha1.DataObject{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Data:       lsv1alpha1.AnyJSON{RawMessage: fmt.Appendf(nil, "%q", value)},
			})).To(Succeed())
		}
		dataObject("team-env-namespace", p.namespace)
		dataObject("outside-namespace", ns)

		inside := createInstallation(ctx, ns, mustRead("examples/provisioned-namespace/installation.yaml"))
		Eventually(installationJob(ctx, ns, inside.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: "team-app"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello from Terrace"))

		By("the same blueprint aimed at a namespace the claim does not grant fails with Forbidden")
		text := strings.ReplaceAll(string(mustRead("examples/provisioned-namespace/installation.yaml")), "dataRef: team-env-namespace", "dataRef: outside-namespace")
		text = strings.Replace(text, "name: team-app\n", "name: team-app-outside\n", 1)
		createInstallation(ctx, ns, []byte(text))
		Eventually(func(g Gomega) string {
			items := &lsv1alpha1.DeployItemList{}
			g.Expect(env.Client.List(ctx, items, client.InNamespace(ns))).To(Succeed())
			for _, di := range items.Items {
				if di.Status.LastError != nil && strings.Contains(di.Status.LastError.Message, ns) {
					return di.Status.LastError.Message
				}
			}
			return ""
		}).WithContext(ctx).Should(ContainSubstring("forbidden"), func() string { return describe(ctx, ns) })
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team-app"}, &corev1.ConfigMap{})).NotTo(Succeed())
	})

	It("interrupts a running job across processes: the tree ends Failed, the running item interrupted", func(ctx SpecContext) {
		ns := newNamespace(ctx, "interrupt")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		root := createInstallation(ctx, ns, installation("forever", mockItem("forever", "phase: Progressing")))

		Eventually(func(g Gomega) {
			items := itemsOf(ctx, ns)
			g.Expect(items).To(HaveKey("forever"))
			di := items["forever"]
			g.Expect(di.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
			g.Expect(di.Status.JobID).NotTo(BeEmpty())
		}).WithContext(ctx).Should(Succeed(), func() string { return describe(ctx, ns) })

		annotate(ctx, root, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationInterrupt))
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseFailed), func() string { return describe(ctx, ns) })
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
		Expect(root.Annotations).NotTo(HaveKey(lsv1alpha1.OperationAnnotation), "the interrupt annotation is consumed")
		di := itemsOf(ctx, ns)["forever"]
		Expect(di.Status.Phase).To(Equal(lsv1alpha1.PhaseFailed))
		Expect(di.Status.LastError).NotTo(BeNil())
		Expect(di.Status.LastError.Codes).To(ContainElement(lsv1alpha1.ErrorInterrupted))
	})

	It("deletes a tree without uninstalling: objects go, what they deployed stays", func(ctx SpecContext) {
		ns := newNamespace(ctx, "keep")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		root := createInstallation(ctx, ns, installation("keep", configMapItem("config", ns, "kept")))
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &corev1.ConfigMap{})).To(Succeed())

		annotate(ctx, root, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(root).Should(BeTrue(), func() string { return describe(ctx, ns) })
		executions := &lsv1alpha1.ExecutionList{}
		Expect(env.Client.List(ctx, executions, client.InNamespace(ns))).To(Succeed())
		Expect(executions.Items).To(BeEmpty())
		Expect(itemsOf(ctx, ns)).To(BeEmpty())
		cm := &corev1.ConfigMap{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, cm)).To(Succeed())
		Expect(cm.DeletionTimestamp).To(BeNil())
	})

	It("completes a job whose controllers were SIGKILLed mid-job, creating nothing twice", func(ctx SpecContext) {
		ns := newNamespace(ctx, "sigkill")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		job := startSlowJob(ctx, ns, "restart", "after-restart")

		By("killing the installation controller, the execution controller and the mock deployer")
		for _, c := range []string{"installation-controller", "execution-controller", "mock-deployer"} {
			env.Kill(ctx, c)
		}
		env.Restart(ctx)

		job.completesOnce(ctx)
	})
})

// slowJob is a root installation's job whose first item (a mock item that
// takes 4 s) runs while the second (a ConfigMap) waits for it.
type slowJob struct {
	ns, configMap string
	root          *lsv1alpha1.Installation
	id            string
	execUID       types.UID
	slow          lsv1alpha1.DeployItem
}

// startSlowJob creates the installation name and returns once its first item
// runs.
func startSlowJob(ctx context.Context, ns, name, configMap string) *slowJob {
	j := &slowJob{ns: ns, configMap: configMap}
	j.root = createInstallation(ctx, ns, installation(name,
		mockItem("slow", "phase: Succeeded\ndelay: 4s")+configMapItem("config", ns, configMap, "slow")))

	By("waiting until the job runs: the first item started, the second waits for it")
	Eventually(func(g Gomega) {
		items := itemsOf(ctx, ns)
		g.Expect(items).To(HaveKey("slow"))
		j.slow = items["slow"]
		g.Expect(j.slow.Status.Phase).To(Equal(lsv1alpha1.PhaseProgressing))
		g.Expect(j.slow.Status.JobID).NotTo(BeEmpty())
	}).WithContext(ctx).Should(Succeed(), func() string { return describe(ctx, ns) })
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j.root), j.root)).To(Succeed())
	j.id = j.root.Status.JobID
	executions := &lsv1alpha1.ExecutionList{}
	Expect(env.Client.List(ctx, executions, client.InNamespace(ns))).To(Succeed())
	Expect(executions.Items).To(HaveLen(1))
	j.execUID = executions.Items[0].UID
	return j
}

// completesOnce waits for the same job to succeed and checks that nothing
// was created twice.
func (j *slowJob) completesOnce(ctx context.Context) {
	By("the same job finishes")
	Eventually(installationJob(ctx, j.ns, j.root.Name)).WithContext(ctx).
		Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, j.ns) })
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j.root), j.root)).To(Succeed())
	Expect(j.root.Status.JobID).To(Equal(j.id), "no new job was started")

	By("nothing was created twice")
	executions := &lsv1alpha1.ExecutionList{}
	Expect(env.Client.List(ctx, executions, client.InNamespace(j.ns))).To(Succeed())
	Expect(executions.Items).To(HaveLen(1))
	Expect(executions.Items[0].UID).To(Equal(j.execUID))
	items := itemsOf(ctx, j.ns) // fails on a duplicate item name
	Expect(items).To(HaveLen(2))
	Expect(items["slow"].UID).To(Equal(j.slow.UID))
	Expect(items["slow"].Status.JobIDFinished).To(Equal(j.id))
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: j.ns, Name: j.configMap}, &corev1.ConfigMap{})).To(Succeed())
}

func mustRead(path string) []byte {
	data, err := os.ReadFile(filepath.Join(env.Root, path))
	Expect(err).NotTo(HaveOccurred())
	return data
}
