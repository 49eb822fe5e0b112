package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/bench/apirequests"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// maxRequestsPerRootInstallation is Terrace's request budget: every API request
// every Terrace process sends for one root installation with one mock item,
// from its create until the processes are quiet again after Succeeded.
const maxRequestsPerRootInstallation = 25

// orchestrationBinaries are the processes one root installation with one mock
// item goes through.
var orchestrationBinaries = []string{"installation-controller", "execution-controller", "mock-deployer"}

// TestAPIRequestsPerRootInstallation counts the API requests the Terrace
// processes send for one root installation with one mock item and fails when
// they exceed maxRequestsPerRootInstallation. It is not timed.
//
// How the requests are counted (kube-apiserver's own metrics, no client-side
// guess; package bench/apirequests): every process runs as its own
// ServiceAccount bound to its generated ClusterRole
// (config/rbac/<binary>/role.yaml), as in the local environment, and the test
// installs API Priority and Fairness FlowSchemas that match exactly that
// ServiceAccount: one per verb and resource its ClusterRole grants, and one
// for anything else. They send the requests to the priority level the
// built-in "service-accounts" FlowSchema would, so the requests are handled
// as before and only counted under other names. kube-apiserver counts every
// request when it starts executing it, watches included, in
// apiserver_flowcontrol_dispatched_requests_total{flow_schema} (refused ones
// in ..._rejected_requests_total), so the delta over those FlowSchemas is
// exactly what the Terrace processes sent, by process, verb and resource.
// The test's own requests (creates, the watch, the /metrics scrapes, as the
// envtest admin) and kube-apiserver's loopback requests fall under the
// built-in "exempt" FlowSchema and are not counted. (apiserver_request_total
// itself has no user label; its delta, minus the test's own requests counted
// on the client side, is logged as well, to show the apply/patch split.)
//
// The processes first run until idle (they listed and watch), then one
// installation runs as a warm-up in a namespace of its own (a controller may
// start an informer on first use: a cost per process, not per installation),
// then the measured installation runs in a fresh namespace. Each step waits
// until no Terrace process has sent a request for quietWindow (Consistently,
// bounded by quietTimeout). Both counts are logged.
func TestAPIRequestsPerRootInstallation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := binDir(t)
	env := testenv.StartT(t, provisioningScheme(t))

	// The test's own client: no client-side rate limit, requests counted.
	own := &apirequests.ClientCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Wrap(own.Wrap)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())

	kubeconfigs, counter := runAsServiceAccounts(t, cs, env.KubeConfig, orchestrationBinaries)
	procCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	for _, b := range orchestrationBinaries {
		startBinary(t, procCtx, filepath.Join(dir, b), kubeconfigs[b])
	}
	// Idle: every process has sent requests (listed, watches) and sends no more.
	g.Eventually(func(g Gomega) {
		for b, n := range totals(g, counter) {
			g.Expect(n).To(BeNumerically(">", 0), "%s has not sent a request yet", b)
		}
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	waitQuiet(g, counter)

	warm := measureRootInstallation(t, c, counter, own, "warm-up")
	t.Logf("warm-up: the first installation after the processes started, in a fresh namespace:\n%s", warm)
	got := measureRootInstallation(t, c, counter, own, "measured")
	t.Logf("measured: the second installation, in a fresh namespace:\n%s", got)
	if got.total > maxRequestsPerRootInstallation {
		t.Errorf("one root installation with one mock item took %d API requests from the Terrace processes, more than %d:\n%s",
			got.total, maxRequestsPerRootInstallation, got)
	}
}

// quietWindow is how long the Terrace processes must send nothing for the
// counts to be final; quietTimeout bounds the wait for that.
const quietWindow, quietTimeout = 2 * time.Second, 60 * time.Second

func totals(g Gomega, counter *apirequests.Counter) map[string]int {
	s, err := counter.Scrape(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	return counter.Totals(s)
}

// waitQuiet waits until no Terrace process has sent a request for quietWindow.
func waitQuiet(g Gomega, counter *apirequests.Counter) {
	g.Eventually(func(g Gomega) {
		before := totals(g, counter)
		g.Consistently(func(g Gomega) map[string]int { return totals(g, counter) }).
			WithTimeout(quietWindow).WithPolling(250 * time.Millisecond).Should(Equal(before))
	}).WithTimeout(quietTimeout).Should(Succeed(), "the Terrace processes did not become quiet")
}

// installationRequests is what one installation cost.
type installationRequests struct {
	total  int
	counts apirequests.Counts
	// requestTotal is the apiserver_request_total delta minus the test's own
	// requests (it includes kube-apiserver's own; watches count when they end).
	requestTotal map[string]int
	// conflicts are the requests of requestTotal answered 409 Conflict.
	conflicts map[string]int
}

func (r installationRequests) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d API requests from the Terrace processes:", r.total)
	byProcess := r.counts.ByProcess()
	for _, p := range slices.Sorted(maps.Keys(byProcess)) {
		fmt.Fprintf(&b, " %s %d", p, byProcess[p])
	}
	b.WriteString("\nby process, verb (server-side apply is patch) and resource:\n")
	_ = r.counts.Write(&b, "  ", 0) // a bytes.Buffer does not fail
	b.WriteString("apiserver_request_total delta without the test's own requests:\n")
	for _, k := range apirequests.SortedByCount(r.requestTotal) {
		fmt.Fprintf(&b, "  %3d  %s", r.requestTotal[k], k)
		if n := r.conflicts[k]; n > 0 {
			fmt.Fprintf(&b, " (%d of them 409 Conflict)", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// measureRootInstallation creates one root installation with one mock item
// in a fresh namespace and counts the requests the Terrace processes send,
// from the create until they are quiet after it Succeeded.
func measureRootInstallation(t *testing.T, c client.WithWatch, counter *apirequests.Counter, own *apirequests.ClientCounter, name string) installationRequests {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "api-requests-" + name
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	// The watch starts before the baseline (kube-apiserver counts it in
	// apiserver_request_total when it ends, after the last scrape).
	w, err := c.Watch(ctx, &lsv1alpha1.InstallationList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	waitQuiet(g, counter)

	before, err := counter.Scrape(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	own.Reset()
	g.Expect(c.Create(ctx, rootInstallationWithOneMockItem(ns, "root"))).To(Succeed())
	waitSucceeded(t, w, "root")
	waitQuiet(g, counter)
	after, err := counter.Scrape(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	counts := counter.Delta(before, after)
	return installationRequests{
		total:        counts.Total(),
		counts:       counts,
		requestTotal: apirequests.RequestsDelta(before, after, own.Counts()),
		conflicts:    apirequests.ConflictsDelta(before, after),
	}
}

// rootInstallationWithOneMockItem is a root installation (operation:
// reconcile) whose inline blueprint renders one execution with one mock item.
func rootInstallationWithOneMockItem(ns, name string) *lsv1alpha1.Installation {
	return &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)},
		},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{
			Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
`},
		}}},
	}
}

// waitSucceeded reads installation events from w until name finished its job
// Succeeded; it fails the test on a failed job or after 90s.
func waitSucceeded(t *testing.T, w watch.Interface, name string) {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of installation %s ended", name)
			}
			inst, isInst := ev.Object.(*lsv1alpha1.Installation)
			if !isInst || inst.Name != name || inst.Status.JobID == "" || inst.Status.JobID != inst.Status.JobIDFinished {
				continue
			}
			if inst.Status.Phase != lsv1alpha1.PhaseSucceeded {
				t.Fatalf("installation %s finished %s: %+v", name, inst.Status.Phase, inst.Status.LastError)
			}
			return
		case <-timeout:
			t.Fatalf("installation %s did not succeed within 90s", name)
		}
	}
}

// serviceAccountNamespace holds the processes' ServiceAccounts, as in the
// local environment.
const serviceAccountNamespace = "terrace-system"

// runAsServiceAccounts gives each binary its own identity, as the local
// environment does: a ServiceAccount in terrace-system bound to the binary's
// generated ClusterRole, and a kubeconfig (returned by binary) with a token of
// it. It installs the counting FlowSchemas for them (see
// TestAPIRequestsPerRootInstallation) and returns their counter.
func runAsServiceAccounts(t testing.TB, cs kubernetes.Interface, adminKubeconfig []byte, binaries []string) (map[string]string, *apirequests.Counter) {
	t.Helper()
	ctx := context.Background()
	root := filepath.Dir(binDir(t))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceAccountNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfigs := map[string]string{}
	var procs []apirequests.Process
	for _, b := range binaries {
		proc := apirequests.Process{Name: b, Namespace: serviceAccountNamespace, ServiceAccount: b}
		for _, role := range clusterRolesOf(t, filepath.Join(root, "config", "rbac", b, "role.yaml")) {
			if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: serviceAccountNamespace, Name: b}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			proc.Rules = append(proc.Rules, role.Rules...)
		}
		procs = append(procs, proc)
		if _, err := cs.CoreV1().ServiceAccounts(serviceAccountNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: b}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(serviceAccountNamespace).CreateToken(ctx, b, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[b] = tokenKubeconfig(t, adminKubeconfig, tr.Status.Token, b)
	}
	counter, err := apirequests.Install(ctx, cs, procs)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfigs, counter
}

// clusterRolesOf decodes the ClusterRoles of a generated role.yaml.
func clusterRolesOf(t testing.TB, path string) []*rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // a file of this repository
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var roles []*rbacv1.ClusterRole
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if role.Name != "" {
			roles = append(roles, role)
		}
	}
	if len(roles) == 0 {
		t.Fatalf("%s holds no ClusterRole: run make generate", path)
	}
	return roles
}

// tokenKubeconfig writes the admin kubeconfig with its credentials replaced
// by a bearer token and returns its path.
func tokenKubeconfig(t testing.TB, adminKubeconfig []byte, token, name string) string {
	t.Helper()
	cfg, err := clientcmd.Load(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.ClientCertificate, ai.ClientCertificateData, ai.ClientKey, ai.ClientKeyData = "", nil, "", nil
		ai.Username, ai.Password, ai.TokenFile = "", "", ""
		ai.Token = token
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
