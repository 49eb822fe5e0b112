// Command terrace-bench is `make bench`: it starts a fresh local environment
// (hack/local-env.sh, in its own directory and on its own ports, every
// controller with its default flags), runs named workloads through every
// process and prints, per workload, the wall time until the first, half and
// all root objects were done, the API requests (kube-apiserver's own counts,
// attributed to each Terrace process, by verb and resource, per root object),
// and CPU seconds and peak RSS per process. Results are also written as JSON
// under .local/bench/. The environment is stopped at the end, also after a
// failure or Ctrl-C (unless -keep).
//
//	terrace-bench [-workloads single,tree,chain,roots,crowded,claims,apicost] [-n roots=50:200:1000,crowded=1000:200,single=20,...] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
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
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apisall "github.com/terrace-dev/terrace/apis/all"
	"github.com/terrace-dev/terrace/bench/apirequests"
)

// serviceAccountNamespace holds the controllers' ServiceAccounts
// (hack/local-env.sh); the bench's target identity lives there too.
const serviceAccountNamespace = "terrace-system"

// targetIdentity is the ServiceAccount in the kubeconfig of the manifest
// workloads' Target: what the manifest deployer sends with it counts as
// "manifest-deployer-target".
const targetIdentity = "manifest-deployer-target"

// Quiet: after a workload, the counters are final once no Terrace process
// has sent a request for quietWindow.
const quietWindow, quietTimeout = 2 * time.Second, 10 * time.Minute

func main() {
	// The informers of the bench log through controller-runtime: quiet.
	ctrllog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "terrace-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	root, dir, out string
	workloads      []string
	sizes          map[string][]int
	keep, reuse    bool
	creators       int
	timeout        time.Duration
}

func parseFlags() (options, error) {
	var o options
	var workloads, sizes string
	flag.StringVar(&workloads, "workloads", strings.Join(allWorkloads, ","), "comma-separated workloads to run: "+strings.Join(allWorkloads, ", "))
	flag.StringVar(&sizes, "n", "", `size overrides, e.g. "roots=50:200,crowded=500:100,single=5,chain=20,claims=50,tree=2" (tree: depth; roots: one run per size; crowded: present:new)`)
	flag.BoolVar(&o.keep, "keep", false, "leave the bench environment running at the end (stop it with TERRACE_LOCAL_DIR=<dir> hack/local-env.sh down)")
	flag.BoolVar(&o.reuse, "reuse", false, "use the environment already running in -dir as it is (e.g. one left by -keep, with controllers restarted with other flags): no clean, no start, no stop")
	flag.StringVar(&o.root, "root", "", "repository root (default: the directory holding go.work)")
	flag.StringVar(&o.dir, "dir", "", "directory of the bench environment (default <root>/.local/bench-env; wiped at start)")
	flag.StringVar(&o.out, "out", "", "directory for the JSON results (default <root>/.local/bench)")
	flag.IntVar(&o.creators, "creators", 16, "concurrent clients creating the root objects of the at-once workloads")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "limit for each workload")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	for _, w := range strings.Split(workloads, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if !slices.Contains(allWorkloads, w) {
			return o, fmt.Errorf("-workloads: unknown workload %q (known: %s)", w, strings.Join(allWorkloads, ", "))
		}
		o.workloads = append(o.workloads, w)
	}
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		return o, err
	}
	if o.root == "" {
		if o.root, err = findRoot(); err != nil {
			return o, err
		}
	}
	if o.dir == "" {
		o.dir = filepath.Join(o.root, ".local", "bench-env")
	}
	if o.out == "" {
		o.out = filepath.Join(o.root, ".local", "bench")
	}
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return o, err
	}
	return o, nil
}

func run() (retErr error) {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env := &localEnv{root: o.root, dir: o.dir, out: os.Stderr}
	if o.reuse {
		fmt.Fprintf(os.Stderr, "==> using the environment running in %s\n", o.dir)
	} else {
		fmt.Fprintf(os.Stderr, "==> a fresh bench environment in %s\n", o.dir)
		if err := env.clean(ctx); err != nil {
			return err
		}
		defer func() {
			if o.keep {
				fmt.Fprintf(os.Stderr, "==> the bench environment keeps running: export KUBECONFIG=%s; stop it with TERRACE_LOCAL_DIR=%s hack/local-env.sh down\n", env.kubeconfig(), o.dir)
				return
			}
			fmt.Fprintln(os.Stderr, "==> stopping the bench environment")
			retErr = errors.Join(retErr, env.down())
		}()
		if err := env.up(ctx); err != nil {
			return err
		}
	}

	b, err := newBench(ctx, env, o)
	if err != nil {
		return err
	}
	rep := &report{
		Started:  time.Now().UTC(),
		Machine:  machine(),
		Commit:   gitCommit(o.root),
		Flags:    strings.Join(os.Args[1:], " "),
		QuietFor: quietWindow.String(),
	}
	var runErr error
	for _, name := range o.workloads {
		if name == wAPICost {
			costs, err := b.apiCost(ctx, o.sizes[name][0], o.creators)
			rep.APICost = costs
			if err == nil {
				err = writeAPICost(os.Stdout, costs)
			}
			if err != nil {
				runErr = errors.Join(runErr, fmt.Errorf("%s: %w", wAPICost, err))
			}
			continue
		}
		for _, w := range newWorkloads(name, o.sizes[name], o.creators) {
			res := b.measure(ctx, w)
			rep.Results = append(rep.Results, res)
			if err := res.write(os.Stdout); err != nil {
				return err
			}
			if res.Error != "" {
				runErr = errors.Join(runErr, fmt.Errorf("%s: %s", res.Workload, res.Error))
			}
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := rep.writeSummary(os.Stdout); err != nil {
		return errors.Join(runErr, err)
	}
	path, err := rep.save(o.out)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Printf("\nresults: %s\n", path)
	return runErr
}

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
	b := &bench{cfg: cfg, own: &apirequests.ClientCounter{}, timeout: o.timeout, runID: time.Now().UTC().Format("150405")}
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

	// One counting FlowSchema set per Terrace binary (its ServiceAccount and
	// ClusterRole, as hack/local-env.sh made them) and for the Target's
	// identity.
	var procs []apirequests.Process
	for _, bin := range binaries(b.procs) {
		role, err := b.cs.RbacV1().ClusterRoles().Get(ctx, "terrace-"+bin, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the ClusterRole of %s: %w", bin, err)
		}
		procs = append(procs, apirequests.Process{Name: bin, Namespace: serviceAccountNamespace, ServiceAccount: bin, Rules: role.Rules})
	}
	procs = append(procs, apirequests.Process{
		Name: targetIdentity, Namespace: serviceAccountNamespace, ServiceAccount: targetIdentity,
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
	})
	fmt.Fprintf(os.Stderr, "==> counting requests per process (FlowSchemas %s*)\n", apirequests.NamePrefix)
	if b.count, err = apirequests.Install(ctx, b.cs, procs); err != nil {
		return nil, err
	}
	return b, nil
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

// measure runs one workload in a fresh namespace: prepare, wait until the
// Terrace processes are quiet, take the baseline, run (timed), wait until
// they are quiet again, and take the counts.
func (b *bench) measure(ctx context.Context, w workload) *result {
	res := &result{Workload: w.name, Description: w.description, Roots: w.roots}
	fmt.Fprintf(os.Stderr, "==> %s: %s\n", w.name, w.description)
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if w.close != nil {
		defer w.close()
	}
	fail := func(err error) *result {
		res.Error = err.Error()
		if errors.Is(err, context.Canceled) {
			res.Error = "interrupted (" + res.Error + ")"
		}
		return res
	}

	b.nsSeq++
	res.Namespace = fmt.Sprintf("bench-%s-%02d-%s", b.runID, b.nsSeq, w.name)
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: res.Namespace}}); err != nil {
		return fail(err)
	}
	if err := w.prepare(ctx, b, res.Namespace); err != nil {
		return fail(fmt.Errorf("preparing: %w", err))
	}
	if err := b.count.WaitQuiet(ctx, quietWindow, quietTimeout); err != nil {
		return fail(fmt.Errorf("before the run: %w", err))
	}

	for _, p := range b.procs {
		resetPeakRSS(p.PID)
	}
	procBefore := b.sampleProcs()
	before, err := b.count.Scrape(ctx)
	if err != nil {
		return fail(err)
	}
	b.own.Reset()

	tm, runErr := w.run(ctx, b, res.Namespace)
	// CPU is counted until all is done (not through the quiet wait, whose
	// /metrics scrapes cost kube-apiserver CPU of their own).
	procDone := b.sampleProcs()
	res.setTiming(tm)
	if runErr != nil {
		res.Error = runErr.Error()
	}
	if err := b.count.WaitQuiet(ctx, quietWindow, quietTimeout); err != nil {
		res.Error = strings.TrimPrefix(res.Error+"; after the run: "+err.Error(), "; ")
	}
	after, err := b.count.Scrape(ctx)
	if err != nil {
		return fail(err)
	}
	res.QuietSec = seconds(after.Time.Sub(tm.start))
	procAfter := b.sampleProcs()
	own := b.own.Counts()

	counts := b.count.Delta(before, after)
	res.TerraceRequests = counts.Total()
	res.PerRoot = float64(res.TerraceRequests) / float64(w.roots)
	res.RequestsByProcess = counts.ByProcess()
	res.TerraceBreakdown = counts.Entries()
	res.counts = counts
	res.APIServerRequests = apirequests.RequestsDelta(before, after, own)
	res.BenchRequests = own
	res.Conflicts = apirequests.ConflictsDelta(before, after)
	res.OtherFlowSchemas = map[string]int{}
	for fs, v := range after.FlowSchemas {
		if strings.HasPrefix(fs, apirequests.NamePrefix) {
			continue
		}
		if n := int(v - before.FlowSchemas[fs]); n > 0 {
			res.OtherFlowSchemas[fs] = n
		}
	}
	for _, p := range b.procs {
		pb, okB := procBefore[p.PID]
		pd, okD := procDone[p.PID]
		pa, okA := procAfter[p.PID]
		pr := procResult{Name: p.Name, PID: p.PID}
		if okB && okD && okA {
			pr.CPUSec = float64(pd.cpuTicks-pb.cpuTicks) / clockTicks
			pr.PeakRSSMB = float64(max(pa.hwmKB, pd.hwmKB)) / 1024
			pr.RSSMB = float64(pa.rssKB) / 1024
		} else {
			pr.Gone = true
		}
		res.Processes = append(res.Processes, pr)
	}
	return res
}

func (b *bench) sampleProcs() map[int]procSample {
	out := map[int]procSample{}
	for _, p := range b.procs {
		if s, err := readProc(p.PID); err == nil {
			out[p.PID] = s
		}
	}
	return out
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// machine describes where the figures were taken.
func machine() machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				m.Memory = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvgAtStart = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	return m
}

// gitCommit is the checked-out commit (without running git: .git/HEAD).
func gitCommit(root string) string {
	head, err := os.ReadFile(filepath.Join(root, ".git", "HEAD"))
	if err != nil {
		return ""
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !isRef {
		return ref
	}
	id, err := os.ReadFile(filepath.Join(root, ".git", filepath.FromSlash(ref))) //nolint:gosec // a path inside .git
	if err != nil {
		return ref
	}
	return strings.TrimSpace(string(id))
}
