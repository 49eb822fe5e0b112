package main

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apisall "github.com/terrace-dev/terrace/apis/all"
	"github.com/terrace-dev/terrace/bench/apirequests"
)

// bench is the running bench: clients of the admin, the request counter,
// the processes.
type bench struct {
	cfg    *rest.Config
	scheme *k8sruntime.Scheme
	c      client.Client
	cs     kubernetes.Interface
	own    *apirequests.ClientCounter
	count  *apirequests.Counter
	procs  []component
	// targetKubeconfig is the kubeconfig of the manifest workloads' Target.
	targetKubeconfig []byte
	timeout          time.Duration
	// root is the repository root; registry the address of the
	// environment's OCI registry, where chartPushed and componentPushed say
	// the chart and the component version are.
	root            string
	registry        string
	chartPushed     bool
	componentPushed bool
	// runID and nsSeq make the namespaces unique, also in a reused environment.
	runID string
	nsSeq int
}

func newBench(ctx context.Context, env *localEnv, o options) (*bench, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig())
	if err != nil {
		return nil, err
	}
	// The bench's own client: no client-side rate limit (it must never be
	// what a workload waits for), its requests counted to subtract them.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "terrace-bench"
	b := &bench{cfg: cfg, own: &apirequests.ClientCounter{}, timeout: o.timeout, runID: time.Now().UTC().Format("150405"), root: env.root}
	if b.registry, err = readRegistryAddress(env); err != nil {
		return nil, err
	}
	cfg.Wrap(b.own.Wrap)
	b.scheme = k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(b.scheme); err != nil {
		return nil, err
	}
	if err := apisall.AddToScheme(b.scheme); err != nil {
		return nil, err
	}
	if b.c, err = client.New(cfg, client.Options{Scheme: b.scheme}); err != nil {
		return nil, err
	}
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if b.procs, err = env.components(); err != nil {
		return nil, err
	}
	if b.targetKubeconfig, err = b.targetIdentity(ctx, env); err != nil {
		return nil, err
	}

	procs, err := b.countedProcesses(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "==> counting requests per process (FlowSchemas %s*)\n", apirequests.NamePrefix)
	if b.count, err = apirequests.Install(ctx, b.cs, procs); err != nil {
		return nil, err
	}
	return b, nil
}

// countedProcesses are the processes whose requests are counted: each
// Terrace binary (its ServiceAccount and ClusterRole, as hack/local-env.sh
// made them) and the Target's identity.
func (b *bench) countedProcesses(ctx context.Context) ([]apirequests.Process, error) {
	var procs []apirequests.Process
	for _, bin := range binaries(b.procs) {
		role, err := b.cs.RbacV1().ClusterRoles().Get(ctx, "terrace-"+bin, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the ClusterRole of %s: %w", bin, err)
		}
		procs = append(procs, apirequests.Process{Name: bin, Namespace: serviceAccountNamespace, ServiceAccount: bin, Rules: role.Rules})
	}
	return append(procs, apirequests.Process{
		Name: targetIdentity, Namespace: serviceAccountNamespace, ServiceAccount: targetIdentity,
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
	}), nil
}

// nextNamespace names the namespace of the next workload; runID and the
// sequence number keep it unique, also in a reused environment.
func (b *bench) nextNamespace(workload string) string {
	b.nsSeq++
	return fmt.Sprintf("bench-%s-%02d-%s", b.runID, b.nsSeq, workload)
}

func (b *bench) createNamespace(ctx context.Context, ns string) error {
	return b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// targetIdentity creates a ServiceAccount bound to cluster-admin (as
// `make demo` does for its Target) and returns a kubeconfig with its token.
func (b *bench) targetIdentity(ctx context.Context, env *localEnv) ([]byte, error) {
	if _, err := b.cs.CoreV1().ServiceAccounts(serviceAccountNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: targetIdentity}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := b.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "terrace-bench-" + targetIdentity},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: serviceAccountNamespace, Name: targetIdentity}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tr, err := b.cs.CoreV1().ServiceAccounts(serviceAccountNamespace).CreateToken(ctx, targetIdentity, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.LoadFromFile(env.kubeconfig())
	if err != nil {
		return nil, err
	}
	// Inline the CA: the kubeconfig is read by the manifest deployer from a Secret.
	for _, cl := range kc.Clusters {
		if cl.CertificateAuthority != "" {
			ca, err := os.ReadFile(cl.CertificateAuthority)
			if err != nil {
				return nil, err
			}
			cl.CertificateAuthority, cl.CertificateAuthorityData = "", ca
		}
	}
	for _, ai := range kc.AuthInfos {
		ai.ClientCertificate, ai.ClientCertificateData, ai.ClientKey, ai.ClientKeyData = "", nil, "", nil
		ai.Token = tr.Status.Token
	}
	return clientcmd.Write(*kc)
}
