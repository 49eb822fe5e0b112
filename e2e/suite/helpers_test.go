package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// fieldOwner is the field manager of everything the suite applies, as
// `kubectl apply --server-side` would use "kubectl".
const fieldOwner = client.FieldOwner("terrace-e2e")

// newNamespace creates a namespace for one spec. It is deleted when the spec
// ends, after the spec's own cleanups (DeferCleanup runs last-in first-out, so
// installations registered later are deleted before their namespace).
func newNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
}

// deleteAndWait deletes obj when the spec ends and waits until it is gone, so
// that its finalizers run while everything it needs still exists.
func deleteAndWait(obj client.Object) {
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(Succeed())
		Eventually(env.isGone).WithContext(ctx).WithArguments(obj).Should(BeTrue(), "%T %s is gone", obj, obj.GetName())
	})
}

// clusterKubeconfig returns a kubeconfig for the environment's own cluster,
// as the deployers reach it, authenticated with the token of a ServiceAccount
// in ns bound to cluster-admin (an admin kubeconfig, as a user would put into
// a Target for a cluster they own).
func clusterKubeconfig(ctx context.Context, ns string) []byte {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-target"}}
	Expect(env.Client.Create(ctx, sa)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, sa))).To(Succeed())
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "terrace-e2e-target-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	Expect(env.Client.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, binding))).To(Succeed())
	})
	tr, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	ca := env.Config.CAData
	if len(ca) == 0 && env.Config.CAFile != "" {
		ca, err = os.ReadFile(env.Config.CAFile)
		Expect(err).NotTo(HaveOccurred())
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: env.TargetServer, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	Expect(err).NotTo(HaveOccurred())
	return data
}

// createTarget creates a kubernetes-cluster Target name in ns whose kubeconfig
// is in a Secret of the same name.
func createTarget(ctx context.Context, ns, name string, kubeconfig []byte) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	Expect(env.Client.Create(ctx, secret)).To(Succeed())
	target := &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lsv1alpha1.TargetSpec{
			Type:      "landscaper.gardener.cloud/kubernetes-cluster",
			SecretRef: &lsv1alpha1.LocalSecretReference{Name: secret.Name, Key: "kubeconfig"},
		},
	}
	Expect(env.Client.Create(ctx, target)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, target))).To(Succeed())
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, secret))).To(Succeed())
	})
}

// applyYAML server-side applies every object of a YAML stream, as
// `kubectl apply --server-side -n ns` would: namespaced objects without a
// namespace land in ns. It returns the applied objects.
func applyYAML(ctx context.Context, ns string, data []byte) []*unstructured.Unstructured {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) == 0 {
			continue
		}
		namespaced, err := env.Client.IsObjectNamespaced(u)
		Expect(err).NotTo(HaveOccurred())
		if namespaced && ns != "" {
			u.SetNamespace(ns)
		}
		Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), fieldOwner, client.ForceOwnership)).
			To(Succeed(), "applying %s %s", u.GetKind(), u.GetName())
		out = append(out, u)
	}
}

// applyFile applies a file of the repository (path relative to its root).
func applyFile(ctx context.Context, ns, path string) []*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join(env.Root, path))
	Expect(err).NotTo(HaveOccurred())
	return applyYAML(ctx, ns, data)
}

// installationJob returns a function reporting an installation's phase once
// its current job has finished ("" before), for Eventually.
func installationJob(ctx context.Context, ns, name string) func(Gomega) lsv1alpha1.Phase {
	return func(g Gomega) lsv1alpha1.Phase {
		inst := &lsv1alpha1.Installation{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst)).To(Succeed())
		if inst.Status.JobID == "" || inst.Status.JobID != inst.Status.JobIDFinished {
			return ""
		}
		return inst.Status.Phase
	}
}

// deployItemPhase returns a function reporting a deploy item's phase.
func deployItemPhase(ctx context.Context, ns, name string) func(Gomega) lsv1alpha1.Phase {
	return func(g Gomega) lsv1alpha1.Phase {
		di := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, di)).To(Succeed())
		return di.Status.Phase
	}
}

// itemsOf lists the deploy items in ns by their name inside the execution.
func itemsOf(ctx context.Context, ns string) map[string]lsv1alpha1.DeployItem {
	list := &lsv1alpha1.DeployItemList{}
	Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	out := map[string]lsv1alpha1.DeployItem{}
	for _, di := range list.Items {
		name := di.Labels[lsv1alpha1.ExecutionItemNameLabel]
		Expect(out).NotTo(HaveKey(name), "two deploy items named %q in the execution", name)
		out[name] = di
	}
	return out
}

// describe is a short state dump for failure messages.
func describe(ctx context.Context, ns string) string {
	var b bytes.Buffer
	insts := &lsv1alpha1.InstallationList{}
	_ = env.Client.List(ctx, insts, client.InNamespace(ns))
	for _, i := range insts.Items {
		fmt.Fprintf(&b, "installation %s: phase=%s job=%s finished=%s err=%v\n", i.Name, i.Status.Phase, i.Status.JobID, i.Status.JobIDFinished, i.Status.LastError)
	}
	items := &lsv1alpha1.DeployItemList{}
	_ = env.Client.List(ctx, items, client.InNamespace(ns))
	for _, i := range items.Items {
		fmt.Fprintf(&b, "deployitem %s: phase=%s job=%s finished=%s err=%v\n", i.Name, i.Status.Phase, i.Status.JobID, i.Status.JobIDFinished, i.Status.LastError)
	}
	return b.String()
}
